"""One result schema and one writer: results.json, results.md and the plots of every comparison, with the
tables and the papers' published numbers they are set against."""

from .schema import RESULTS_KEYS, RUN_FIELDS, SCHEMA_VERSION, RunResult, check_results_schema
from .tables import audit_findings, markdown_table, summarize
from .writer import FILES, check_writable, report_markdown, write_report

__all__ = ["RESULTS_KEYS", "RUN_FIELDS", "SCHEMA_VERSION", "RunResult", "check_results_schema", "audit_findings", "markdown_table",
           "summarize", "FILES", "check_writable", "report_markdown", "write_report"]
