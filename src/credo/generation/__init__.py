"""The generation layer (design.md): the SQLite store, the executor and the model pool.

The only layer that calls models; every model comes from one :class:`ModelPool`.
"""
