"""Reading Prometheus text (the value of one series, the names of every series) and the metric
names PromQL queries read."""

import re
from typing import Any

import promql_parser
from prometheus_client.parser import text_string_to_metric_families

_GRAFANA_INTERVAL = re.compile(
    r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}"
)

# The series names a family of each type has in the text format, from the family's name.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "gauge": ("",),
    "stateset": ("",),
    "info": ("_info",),
    "untyped": ("",),
    "unknown": ("",),
}


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of series `name` with exactly `labels` in `text`, or None when it is absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def series_names(text: str) -> set[str]:
    """Every series name `text` declares, with or without samples yet: a labelled metric with
    no series so far still has its `# TYPE` line, from which its series' names follow."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in _SUFFIXES[family.type])
        names.update(sample.name for sample in family.samples)
    return names


def queried_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression reads, from its syntax tree (promql-parser, the
    Python binding of a Rust PromQL parser): no function, keyword or label is mistaken for one.
    Grafana's interval variables (`$__rate_interval`, ...) become a duration first."""
    names: set[str] = set()
    pending: list[Any] = [promql_parser.parse(_GRAFANA_INTERVAL.sub("5m", expr))]
    while pending:
        node = pending.pop()
        if isinstance(node, promql_parser.VectorSelector):
            names.update(
                m.value for m in node.matchers.matchers if m.name == "__name__"
            )  # `{__name__="..."}` spells the name as a label
            if node.name:
                names.add(node.name)
        elif isinstance(node, promql_parser.MatrixSelector):
            pending.append(node.vector_selector)
        elif isinstance(node, promql_parser.BinaryExpr):
            pending += [node.lhs, node.rhs]
        elif isinstance(node, promql_parser.AggregateExpr):
            pending += [node.expr] + ([node.param] if node.param is not None else [])
        elif isinstance(node, promql_parser.Call):
            pending += list(node.args)
        elif isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr,
                               promql_parser.SubqueryExpr)):  # fmt: skip
            pending.append(node.expr)
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL `expr` of a Grafana dashboard's panels, rows' panels included."""
    exprs: list[str] = []
    pending = list(dashboard.get("panels", []))
    while pending:
        panel = pending.pop()
        pending += panel.get("panels", [])
        exprs += [t["expr"] for t in panel.get("targets", []) if t.get("expr")]
    return exprs
