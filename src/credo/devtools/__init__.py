"""Tools for trying credo without a model of your own: the loopback toy model of the
tutorials (:mod:`credo.devtools.toy_server`, ``credo toy-server``)."""
