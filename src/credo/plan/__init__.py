"""The plan layer (design.md): the sample sets each method needs, as requests."""
