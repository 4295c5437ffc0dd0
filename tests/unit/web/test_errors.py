"""Error answers never quote more than a bounded piece of a request, validation problems are
named by the value without echoing it, and sign-in never redirects off the console."""

from __future__ import annotations

from tenantq.web.errors import describe_validation
from tenantq.web.messages import LONGEST_REASON, quoted, shorten
from tenantq.web.sign_in import safe_next


def test_messages_are_bounded() -> None:
    huge = "x" * 10_000_000
    assert len(shorten(huge)) == LONGEST_REASON
    assert len(quoted(huge)) < 70 and quoted("abc") == "'abc'"


def test_validation_problems_name_the_value_not_its_content() -> None:
    problems = [
        {
            "type": "finite_number",
            "loc": ("body", "rate"),
            "msg": "Input should be a finite number",
            "input": float("nan"),
        },
        {
            "type": "less_than_equal",
            "loc": ("query", "limit"),
            "msg": "Input should be <= 1000",
            "input": "9" * 1000,
        },
        {
            "type": "string_type",
            "loc": ("body", "job_ids", 3),
            "msg": "Input should be a valid string",
            "input": 4,
        },
        {"type": "json_invalid", "loc": ("body", 12), "msg": "JSON decode error", "input": {}},
    ]
    text = describe_validation(problems)
    assert text == (
        "rate: Input should be a finite number; limit: Input should be <= 1000; "
        "job_ids.3: Input should be a valid string; body: not valid JSON"
    )
    many = describe_validation(problems * 3)
    assert many.endswith("and 7 more")


def test_sign_in_only_redirects_within_the_console() -> None:
    assert safe_next("/dlq?queue=default") == "/dlq?queue=default"
    for target in (
        "//evil.example/",
        "/\\evil.example",
        "/\t/evil.example",
        "https://evil.example",
        "",
        None,
        "/" + "a" * 3000,
    ):
        assert safe_next(target) == "/"
