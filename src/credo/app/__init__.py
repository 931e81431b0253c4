"""The application layer: one module per command family, mirroring :mod:`credo.cli`, each
the one place its command's work lives. A command's function opens the model pool, loads
the embedder, runs the pipeline and writes the files, and returns a typed result; the
command line only merges its flags into the config, calls it, prints the result and maps
its outcome to an exit status. :mod:`credo.api` re-exports the public names.

- :mod:`credo.app.run`: ``credo run`` (:func:`~credo.app.run.run`,
  :func:`~credo.app.run.dry_run`).
- :mod:`credo.app.score`: ``credo score``.
- :mod:`credo.app.certify`: ``credo certify`` (a run's threshold, its claims, the
  adaptive decision procedure).
- :mod:`credo.app.claims`: ``credo certify-claims``, ``credo filter-claims``.
- :mod:`credo.app.study`: ``credo study``.
- :mod:`credo.app.adaptive`: ``credo adaptive``.
- :mod:`credo.app.perturb`: ``credo perturb topic-check``, ``calibrate-threshold``,
  ``calibrate-prompt``.
- :mod:`credo.app.strength`: ``credo strength run``, ``credo strength agree``.
- :mod:`credo.app.probe`: ``credo probe``.
- :mod:`credo.app.report`: ``credo report``.
- :mod:`credo.app.catalogue`: ``credo cache stats``.
- :mod:`credo.app.logs`: the command line's log filter.
- :mod:`credo.app.common`: what the commands share (the config's pool, a run folder read
  back, the checks of the files a command writes).

``credo serve`` is the gateway's own package (:mod:`credo.serve`), which the command line
calls directly; a certificate's reading, writing and binding are
:mod:`credo.pipeline.certificate`'s.
"""
