"""Run records in; tables, report.md and plots out. Imports no torch (``quicktrain report``
starts in a fraction of a second)."""

from quicktrain.records import METRIC_FIELDS, RunRecord
from quicktrain.reporting.table import format_table

__all__ = ["METRIC_FIELDS", "RunRecord", "format_table"]
