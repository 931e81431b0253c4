"""The pipeline (design.md): the stages of a run in order, returning typed results."""
