"""Run records in, tables (and later plots) out."""

from quicktrain.reporting.record import METRIC_FIELDS, RunRecord, environment
from quicktrain.reporting.table import format_table

__all__ = ["METRIC_FIELDS", "RunRecord", "environment", "format_table"]
