"""The tripwire's 20 fixed prompts and what counts as a right answer (data, kept in code so the agent
package carries it without package-data).

Answers are chosen to be distinctive (a random-weight model cannot hit "Jupiter" or "391" by chance) and
short, so an answer is graded on what the model concluded, not on its working. ``expect`` holds regular
expressions matched case-insensitively with word boundaries unless ``case`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    id: str
    prompt: str
    expect: tuple[str, ...]
    case: bool = False
    """Match case-sensitively (instruction-following items)."""


ITEMS: tuple[Item, ...] = (
    Item("capital-france", "What is the capital of France? Answer with one word.", ("paris",)),
    Item("multiply", "What is 17 multiplied by 23? Give only the number.", ("391",)),
    Item(
        "largest-planet",
        "Which planet in our solar system is the largest? Answer with one word.",
        ("jupiter",),
    ),
    Item(
        "gold-symbol",
        "What is the chemical symbol for gold? Answer with the symbol only.",
        ("au",),
        case=False,
    ),
    Item("minutes", "How many minutes are there in 3 hours? Give only the number.", ("180",)),
    Item("ww2-end", "In which year did the Second World War end? Give only the year.", ("1945",)),
    Item("sqrt", "What is the square root of 144? Give only the number.", ("12",)),
    Item(
        "reverse",
        "Write the word 'banana' spelled backwards, letter by letter reversed, as one word.",
        ("ananab",),
    ),
    Item("author", "Who wrote the play 'Romeo and Juliet'? Give the author's surname.", ("shakespeare",)),
    Item(
        "boiling",
        "At sea level, what is the boiling point of water in degrees Celsius? Give only the number.",
        ("100",),
    ),
    Item(
        "photosynthesis",
        "Which gas do plants take in from the air for photosynthesis? Answer in a few words.",
        ("carbon dioxide", "co2", "co₂"),
    ),
    Item(
        "train",
        "A train travels at 60 km per hour for 2.5 hours. How many kilometres does it travel? "
        "Give only the number.",
        ("150",),
    ),
    Item("sequence", "What is the next number in the sequence 2, 4, 8, 16? Give only the number.", ("32",)),
    Item("french", "Translate the English word 'cat' into French. Answer with one word.", ("chat",)),
    Item("ocean", "What is the largest ocean on Earth? Answer with its name.", ("pacific",)),
    Item(
        "alphabetical",
        "Sort these words alphabetically and reply with only the first one: pear, mango, apple, orange.",
        ("apple",),
    ),
    Item("subtract", "What is 1000 minus 387? Give only the number.", ("613",)),
    Item("leap-year", "How many days are there in a leap year? Give only the number.", ("366",)),
    Item("atomic-one", "Which chemical element has atomic number 1? Answer with its name.", ("hydrogen",)),
    Item(
        "instruction",
        "Reply with the single word TRIPWIRE in capital letters and nothing else.",
        ("TRIPWIRE",),
        case=True,
    ),
)
