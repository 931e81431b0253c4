"""The gateway: a certified accept/abstain decision in front of a model.

- :class:`credo.serve.guard.Guard` (``credo.Guard``): the Python form. Questions asked
  together (``ask`` from several threads, ``ask_many``) are batched into the same rounds
  of one executor through the cache; each answer comes with its credibility score and
  whether the certificate accepts it.
- :mod:`credo.serve.app`: the HTTP layer over a Guard, speaking OpenAI's chat
  completions protocol (FastAPI): auth, limits, errors in OpenAI's shape.
- :mod:`credo.serve.server`: ``credo serve``: the Guard, the app and uvicorn, with a
  graceful shutdown.
- :mod:`credo.serve.log`: the JSONL decision log.
- :mod:`credo.serve.guardrail`: the same decisions as LiteLLM's "Generic Guardrail API"
  (a check before LiteLLM's model is called and one of its answer), mounted by the server.

What a question is asked and how its answer is decided is the pipeline's
(:mod:`credo.pipeline.gateway`); nothing here scores. FastAPI and uvicorn are imported
only by :mod:`credo.serve.app`, :mod:`credo.serve.guardrail` and :mod:`credo.serve.server`
(the ``serve`` extra).
"""

__all__: list[str] = []
