"""Page tables: each table follows its marker and runs to the next blank line; every other byte of
the page stays as it was (src/tcpdelay/reproductions/page_tables.py)."""

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.reproductions.page_tables import replace_tables

PAGE = """# Page

<!-- table a -->
| x |
|---|
| 1 |

Text after table a.

<!-- table b -->

## A heading after an empty marker

Last paragraph.
"""


def test_a_table_is_replaced_up_to_the_next_blank_line_and_nothing_else():
    new, changed = replace_tables(PAGE, {"<!-- table a -->": "| x |\n|---|\n| 2 |"})
    assert changed == ["<!-- table a -->"]
    assert new == PAGE.replace("| 1 |", "| 2 |")
    again, changed = replace_tables(new, {"<!-- table a -->": "| x |\n|---|\n| 2 |"})
    assert again == new and changed == []


def test_a_marker_without_a_table_gets_one_and_keeps_what_follows():
    """A marker followed by a blank line has no table yet: the table goes in before that blank
    line; the heading and paragraph after it stay (running to the next blank line ate them)."""
    new, changed = replace_tables(PAGE, {"<!-- table b -->": "| y |\n|---|\n| 3 |"})
    assert changed == ["<!-- table b -->"]
    assert new == PAGE.replace("<!-- table b -->\n", "<!-- table b -->\n| y |\n|---|\n| 3 |\n")
    assert "## A heading after an empty marker\n\nLast paragraph.\n" in new
    again, changed = replace_tables(new, {"<!-- table b -->": "| y |\n|---|\n| 3 |"})
    assert again == new and changed == []


def test_a_marker_at_the_end_of_the_page_gets_its_table():
    new, _ = replace_tables("intro\n\n<!-- t -->\n", {"<!-- t -->": "| z |"})
    assert new == "intro\n\n<!-- t -->\n| z |\n"


def test_a_missing_marker_is_named():
    with pytest.raises(ParameterError, match="table c"):
        replace_tables(PAGE, {"<!-- table c -->": "| c |"})
