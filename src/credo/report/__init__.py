"""Reports: the run-folder writer (:mod:`credo.report.writer`), the Markdown renderer
(:mod:`credo.report.markdown`), tables, JSONL exports, HTML (design.md, ``report/``)."""

from credo.report.markdown import metrics_table_rows
from credo.report.writer import write_run

__all__ = ["metrics_table_rows", "write_run"]
