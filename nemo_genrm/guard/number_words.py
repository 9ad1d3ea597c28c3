"""The words for zero, one, first and second in the languages of the verdict vocabulary.

A verdict label spelled out (``Verdict: one``, ``Urteil: eins``, ``判定：一``, ``Вердикт: один``,
``Verdict: the first option``) dictates a verdict as well as the digit does, so the values a label
line may carry include these words. They come from maintained data rather than a hand list:
:data:`NUMBER_WORDS` is generated from the ``num2words`` library (the cardinals 0 and 1 and the
ordinals 1 and 2 of every language it knows among :data:`nemo_genrm.guard.vocabulary.VERDICT_WORDS`'
45) by running this module as a script where ``num2words`` is installed, so the package needs
no such dependency at run time::

    python -m nemo_genrm.guard.number_words [LANGUAGE ...] > /tmp/table.py

The languages ``num2words`` does not cover, and the ordinals it does not write, are filled in by
:data:`SUPPLEMENT` (marked as such). A test checks the table against ``num2words`` where it is
installed.
"""

from __future__ import annotations

import sys

__all__ = ["NUMBER_WORDS", "SUPPLEMENT", "read_num2words"]

# (zero, one, first, second) per language, as num2words 0.5.14 writes them.
# fmt: off
NUMBER_WORDS: dict[str, tuple[str, str, str, str]] = {
    'ar': ('صفر', 'واحد', 'اول', 'ثاني'),
    'bn': ('শূন্য', 'এক', 'এক', 'দুই'),
    'ca': ('zero', 'un', 'primer', 'segon'),
    'da': ('nul', 'et', 'første', 'anden'),
    'de': ('null', 'eins', 'erste', 'zweite'),
    'en': ('zero', 'one', 'first', 'second'),
    'es': ('cero', 'uno', 'primero', 'segundo'),
    'fa': ('صفر', 'یک', 'یکم', 'دوم'),
    'fi': ('nolla', 'yksi', 'ensimmäinen', 'toinen'),
    'fr': ('zéro', 'un', 'premier', 'deuxième'),
    'he': ('אפס', 'אחת', 'ראשון', 'שני'),
    'hu': ('nulla', 'egy', 'első', 'második'),
    'id': ('nol', 'satu', 'pertama', 'kedua'),
    'it': ('zero', 'uno', 'primo', 'secondo'),
    'ja': ('零', '一', '一番目', '二番目'),
    'ko': ('영', '일', '첫 번째', '두 번째'),
    'nl': ('nul', 'één', 'eerste', 'tweede'),
    'no': ('null', 'en', 'første', 'andre'),
    'pl': ('zero', 'jeden', 'pierwszy', 'drugi'),
    'pt': ('zero', 'um', 'primeiro', 'segundo'),
    'ro': ('zero', 'unu', 'primul', 'al doilea'),
    'ru': ('ноль', 'один', 'первый', 'второй'),
    'sl': ('nič', 'ena', 'prvi', 'drugi'),
    'sv': ('noll', 'ett', 'första', 'andra'),
    'th': ('ศูนย์', 'หนึ่ง', 'หนึ่ง', 'สอง'),
    'tr': ('sıfır', 'bir', 'birinci', 'ikinci'),
    'uk': ('нуль', 'один', 'перший', 'другий'),
    'vi': ('không', 'một', 'một', 'hai'),
}
# fmt: on

# The languages num2words does not cover, and ordinals it does not write (cs, sk, sr, lv, lt).
SUPPLEMENT: dict[str, tuple[str, str, str, str]] = {
    "bg": ("нула", "едно", "първи", "втори"), "cs": ("nula", "jedna", "první", "druhý"),
    "el": ("μηδέν", "ένα", "πρώτο", "δεύτερο"), "et": ("null", "üks", "esimene", "teine"),
    "hi": ("शून्य", "एक", "पहला", "दूसरा"), "hr": ("nula", "jedan", "prvi", "drugi"),
    "ka": ("ნული", "ერთი", "პირველი", "მეორე"), "lt": ("nulis", "vienas", "pirmas", "antras"),
    "lv": ("nulle", "viens", "pirmais", "otrais"), "ms": ("kosong", "satu", "pertama", "kedua"),
    "sk": ("nula", "jeden", "prvý", "druhý"), "sr": ("nula", "jedan", "prvi", "drugi"),
    "sw": ("sifuri", "moja", "kwanza", "pili"), "ta": ("பூஜ்ஜியம்", "ஒன்று", "முதல்", "இரண்டாவது"),
    "tl": ("wala", "isa", "una", "ikalawa"), "ur": ("صفر", "ایک", "پہلا", "دوسرا"),
    "zh": ("零", "一", "第一", "第二"),
}  # fmt: skip


def read_num2words(languages: list[str]) -> dict[str, tuple[str, str, str, str]]:
    """``{language: (zero, one, first, second)}`` from ``num2words`` for the languages it writes whole."""
    from num2words import num2words

    table = {}
    for lang in languages:
        try:
            row = (num2words(0, lang=lang), num2words(1, lang=lang),
                   num2words(1, lang=lang, to="ordinal"), num2words(2, lang=lang, to="ordinal"))  # fmt: skip
        except (NotImplementedError, KeyError, ValueError):
            continue
        table[lang] = row
    return table


if __name__ == "__main__":
    # The vocabulary's 45 languages are this table's and the supplement's (a test checks it).
    languages = sys.argv[1:] or sorted({*NUMBER_WORDS, *SUPPLEMENT})
    print("NUMBER_WORDS: dict[str, tuple[str, str, str, str]] = {")
    for lang, row in sorted(read_num2words(languages).items()):
        print(f"    {lang!r}: {row!r},")
    print("}")
