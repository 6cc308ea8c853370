"""The SQL keywords a column name is quoted for, kept beside `partition/predicate.py` so that
rendering a filter loads no SQL parser, hold sqlglot's own: a sqlglot that adds a keyword
fails here, and a column named like one is quoted where Lance reads it. The list keeps the
words of every sqlglot the project allows (a user's may be older or newer than CI's): a word
an older sqlglot lacks is quoted where it need not be, which reads the same."""

from __future__ import annotations

import re

from sqlglot.tokens import Tokenizer

from lancens_cli.partition.predicate import quote_column, sql_keywords


def test_the_kept_keywords_are_sqlglots_plain_words():
    words = {k for k in Tokenizer.KEYWORDS if re.fullmatch(r"[A-Z_][A-Z0-9_]*", k)}
    assert words - sql_keywords() == set()


def test_a_column_named_like_a_keyword_is_quoted_and_a_plain_one_is_not():
    assert quote_column("select") == "`select`"
    assert quote_column("between") == "`between`"
    assert quote_column("amount") == "amount"
    assert quote_column("Amount") == "`Amount`"
