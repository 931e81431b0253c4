"""Reports: tables, JSONL exports, Markdown (design.md, ``report/``)."""

from credo.report.writer import metrics_table_rows, write_run

__all__ = ["metrics_table_rows", "write_run"]
