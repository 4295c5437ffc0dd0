"""The shipped Grafana dashboard and Prometheus alert rules only refer to metrics that
``tenantq.observability.specs`` exports (with the suffixes their types expose) and to labels those
metrics carry, and they cover the signals the design calls for, oldest runnable age first.

The PromQL is read with a small tokenizer rather than a full parser: it strips strings,
label matchers, ranges and grouping clauses, and what is left that is not a function,
keyword or number is a metric name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tenantq.observability import specs as metrics

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana" / "tenantq.json"
ALERTS = ROOT / "docs" / "prometheus" / "alerts.yml"

#: Series Prometheus itself provides.
BUILTIN_SERIES = frozenset({"up"})
#: Labels Prometheus adds at scrape time, and the histogram bucket label.
SCRAPE_LABELS = frozenset({"instance", "job", "le"})
KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "inf", "nan"}
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*(\w+)\s*\)")


class PromQL:
    """Metric names, selector labels and grouping labels referenced by an expression."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.metrics: set[str] = set()
        self.selector_labels: dict[str, set[str]] = {}
        self.grouping_labels: set[str] = set()
        text = _STRING.sub('""', expression)
        text = re.sub(r"\$\{?\w+\}?", "", text)  # Grafana variables
        for match in _SELECTOR.finditer(text):
            labels = set(_MATCHER_LABEL.findall(match.group(2)))
            if match.group(1):
                self.selector_labels.setdefault(match.group(1), set()).update(labels)
        text = _SELECTOR.sub(lambda match: match.group(1) or "", text)
        text = re.sub(r"\[[^\]]*\]", "", text)
        for match in _GROUPING.finditer(text):
            self.grouping_labels.update(re.findall(r"\w+", match.group(2)))
        text = _GROUPING.sub(" ", text)
        text = _NUMBER.sub(" ", text)
        for match in _IDENTIFIER.finditer(text):
            followed_by_call = re.match(r"\s*\(", text[match.end() :])
            if not followed_by_call and match.group().lower() not in KEYWORDS:
                self.metrics.add(match.group())


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _dashboard_expressions() -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    dashboard = _dashboard()
    walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        definition = variable.get("definition", "")
        for metric, label in _LABEL_VALUES.findall(definition):
            found.append(f"{metric}{{{label}!=''}}")
    return found


def _alert_rules() -> dict[str, str]:
    """alert name -> expr, read from the rules file (plain and block-scalar ``expr``)."""
    rules: dict[str, str] = {}
    lines = ALERTS.read_text().splitlines()
    current: str | None = None
    for index, line in enumerate(lines):
        alert = re.match(r"\s*- alert:\s*(\S+)", line)
        if alert:
            current = alert.group(1)
            continue
        expr = re.match(r"(\s*)expr:\s*(.*)$", line)
        if not expr:
            continue
        assert current is not None, f"expr outside an alert at line {index + 1}"
        indent, value = len(expr.group(1)), expr.group(2).strip()
        if value in ("|", "|-", ">", ">-"):
            block = []
            for following in lines[index + 1 :]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                block.append(following.strip())
            value = " ".join(part for part in block if part)
        rules[current] = value
    return rules


def _spec_of(sample_name: str) -> metrics.MetricSpec | None:
    for spec in metrics.SPECS:
        if sample_name in spec.sample_names():
            return spec
    return None


def _all_expressions() -> list[str]:
    return _dashboard_expressions() + list(_alert_rules().values())


def test_tokenizer_finds_names_and_is_not_fooled() -> None:
    parsed = PromQL(
        'histogram_quantile(0.99, sum by (queue, le) (rate(tenantq_x_bucket{queue=~"$queue",'
        ' tenant="a b"}[5m]))) / clamp_min(bogus_metric, 1e-9) > 0.05 and on () up == 0'
    )
    assert parsed.metrics == {"tenantq_x_bucket", "bogus_metric", "up"}
    assert parsed.selector_labels == {"tenantq_x_bucket": {"queue", "tenant"}}
    assert parsed.grouping_labels == {"queue", "le"}


@pytest.mark.parametrize("expression", _all_expressions())
def test_every_metric_referenced_is_exported(expression: str) -> None:
    parsed = PromQL(expression)
    assert parsed.metrics, f"no metric in {expression!r}"
    unknown = parsed.metrics - metrics.exported_sample_names() - BUILTIN_SERIES
    assert not unknown, f"{sorted(unknown)} are not exported by tenantq.observability.specs"
    all_labels = set().union(*(spec.labels for spec in metrics.SPECS)) | SCRAPE_LABELS
    assert parsed.grouping_labels <= all_labels, expression
    for name, labels in parsed.selector_labels.items():
        spec = _spec_of(name)
        if spec is not None:
            assert labels <= set(spec.labels) | SCRAPE_LABELS, (name, labels)


def test_dashboard_covers_every_signal_with_oldest_age_first() -> None:
    referenced = set().union(*(PromQL(e).metrics for e in _dashboard_expressions()))
    families = {spec.name for spec in metrics.SPECS if referenced & spec.sample_names()}
    missing = {spec.name for spec in metrics.SPECS} - families - {metrics.STATS_QUERY_DURATION}
    assert not missing, f"the dashboard shows nothing of {sorted(missing)}"
    first = next(panel for panel in _dashboard()["panels"] if panel["type"] != "row")
    assert first["type"] == "stat"
    assert metrics.OLDEST_RUNNABLE_AGE in first["targets"][0]["expr"]
    assert first["gridPos"]["y"] <= 1
    ids = [panel["id"] for panel in _dashboard()["panels"]]
    assert len(ids) == len(set(ids))


def test_alert_rules_cover_the_design() -> None:
    rules = _alert_rules()
    required = {
        "TenantqOldestRunnableAgeBudget": metrics.OLDEST_RUNNABLE_AGE,
        "TenantqDeadLetterRate": metrics.DEAD_LETTERED + "_total",
        "TenantqLeaseExpirations": metrics.LEASE_EXPIRATIONS + "_total",
        "TenantqBreakerOpen": metrics.BREAKER_STATE,
        "TenantqWorkerDown": "up",
        "TenantqWorkerHeartbeatStale": metrics.CLUSTER_WORKERS,
    }
    for alert, metric in required.items():
        assert alert in rules, alert
        assert metric in PromQL(rules[alert]).metrics, alert
    text = ALERTS.read_text()
    assert text.count("- alert:") == len(rules), "every alert has exactly one expr"
    assert "\t" not in text
