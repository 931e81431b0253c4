"""Where a run's samples are generated: this process or Ray actors."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ExecutorConfig(BaseModel):
    """Where a run's samples are generated (``credo run --executor``).

    ``local``: in this process, the backend's own concurrency. ``ray``: on ``workers``
    Ray actors per model, each holding one backend (an embedded model loaded once per
    actor, or a client of a served model); blocks go in calls of at most
    ``blocks_per_call``, at most ``in_flight`` calls outstanding per actor; results
    stream back and this process alone writes the cache, a call's blocks in one
    transaction (:mod:`credo.generation.ray_executor`). ``address`` None starts a local Ray instance
    with ``workers`` CPUs; ``"auto"`` joins the cluster this machine is part of.

    Nothing here enters a request key: either kind fills the same cache rows (keys,
    indices, seeds), so a run can move between them and resume.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = Field(
        "local", description="local (this process) or ray (actors; this process writes the cache)",
    )
    address: str | None = Field(
        None, description="Ray cluster address ('auto': the running cluster); None = local"
    )
    workers: int = Field(2, ge=1, description="Ray actors per model, one backend each")
    in_flight: int = Field(2, ge=1, description="calls outstanding per actor (backpressure)")
    blocks_per_call: int = Field(
        32, ge=1, description="most blocks sent to an actor in one call and committed together"
    )
    num_gpus: float = Field(0.0, ge=0.0, description="GPUs each actor reserves")


