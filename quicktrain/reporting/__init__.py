"""Run records in, tables (and later plots) out."""

from quicktrain.reporting.record import METRIC_FIELDS, RunRecord, atomic_write_text, environment
from quicktrain.reporting.table import format_table

__all__ = ["METRIC_FIELDS", "RunRecord", "atomic_write_text", "environment", "format_table"]
