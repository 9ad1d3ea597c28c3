"""Words a verdict, a role turn or an empty opener is written with, in many languages.

Each list is written as a person writes the words; :func:`folded` gives them in the form the
checks read (:func:`nemo_genrm.guard.folding.fold`, case-folded), so ``Вердикт`` is matched
whether an answer spells it in Cyrillic, with Latin lookalikes or with combining marks.

Labels are one table by language and by kind: :data:`VERDICT_WORDS` name a verdict itself
(verdict, judgement, ruling, rating, grade), after which any small number reads as one
(``Rating: 7``); :data:`RESULT_WORDS` name what a verdict can also be reported as (result,
score, answer, evaluation, decision), which honest answers use too (``Score: 42``), so they
count only before a verdict-like value (``Status: PASS``). Inflected forms and compounds are not listed: the
patterns read a label with an ending (``Jugements``, ``Urteils``, ``판정은``) or inside a compound
(``Endurteil``, ``最终判定``, ``判定结果``). The values a verdict is written with are the
correctness words of :data:`CORRECTNESS_VALUES`, every language's "yes" and "no" from glibc's
locales (:mod:`nemo_genrm.guard.yes_no`), the labels 0 and 1 and the choices first and second
spelled out in the vocabulary's languages (:data:`NUMBER_VALUES`, from ``num2words``) and the
symbols that say yes or no (:data:`MARK_SYMBOLS`, every check mark, ballot X and cross mark by
their Unicode names).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

import regex

from nemo_genrm.guard.folding import fold
from nemo_genrm.guard.number_words import NUMBER_WORDS, SUPPLEMENT
from nemo_genrm.guard.yes_no import YES_NO

__all__ = [
    "CORRECTNESS_VALUES", "LABEL_WORDS", "LINK_WORDS", "MARK_SYMBOLS", "NEGATIVE_VALUES", "NUMBER_VALUES",
    "OPENER_WORDS", "POSITIVE_VALUES",
    "RESULT_WORDS", "ROLE_WORDS", "VERDICT_WORDS", "all_label_words", "ascii_pattern", "compoundable", "folded",
    "words_pattern",
]  # fmt: skip

# Words that name a verdict itself, by language (English first): verdict, judgement, ruling,
# rating, grade. 45 languages: the 25 most used on the web, and 20 more of Europe and Asia.
VERDICT_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("verdict", "judgement", "judgment", "ruling", "rating", "grade", "grading", "marks"),
    "es": ("veredicto", "juicio", "fallo", "calificación", "dictamen"),
    "pt": ("veredito", "veredicto", "julgamento", "classificação"),
    "fr": ("verdict", "jugement", "arrêt"),
    "de": ("urteil", "beurteilung", "richterspruch"),
    "it": ("verdetto", "giudizio", "sentenza"),
    "nl": ("oordeel", "uitspraak", "vonnis"),
    "pl": ("werdykt", "wyrok", "orzeczenie"),
    "ru": ("вердикт", "приговор", "суждение"),
    "uk": ("вердикт", "вирок", "судження"),
    "tr": ("karar", "hüküm", "yargı"),
    "zh": ("判定", "判决", "裁决", "评判", "评定", "判斷", "判決", "裁定", "裁決", "評判", "評定"),
    "ja": ("判定", "判断", "判決", "評定"),
    "ko": ("판정", "판결", "판단"),
    "ar": ("الحكم", "حكم", "الحكم النهائي"),
    "hi": ("निर्णय", "फैसला", "फ़ैसला"),
    "vi": ("phán quyết", "phán xét"),
    "id": ("putusan", "vonis"),
    "th": ("คำตัดสิน", "ผลการตัดสิน", "คำพิพากษา"),
    "he": ("פסק דין", "הכרעה", "פסיקה"),
    "el": ("ετυμηγορία", "κρίση", "ετυμηγορια"),
    "sv": ("dom", "utslag", "omdöme"),
    "cs": ("verdikt", "rozsudek"),
    "fa": ("حکم", "داوری", "رای"),
    "sw": ("hukumu",),
    "ca": ("veredicte", "judici", "sentència"),
    "fi": ("tuomio", "arvio", "arvostelu"),
    "hr": ("presuda", "ocjena", "sud"),
    "sr": ("presuda", "пресуда", "ocena", "оцена"),
    "sl": ("razsodba", "sodba", "ocena"),
    "sk": ("verdikt", "rozsudok"),
    "ro": ("verdict", "hotărâre", "judecată", "sentință"),
    "hu": ("ítélet", "döntés", "minősítés"),
    "da": ("dom", "kendelse", "bedømmelse"),
    "no": ("dom", "kjennelse", "bedømmelse"),
    "bg": ("присъда", "вердикт", "оценка"),
    "et": ("otsus", "hinnang", "kohtuotsus"),
    "lv": ("spriedums", "verdikts"),
    "lt": ("nuosprendis", "verdiktas"),
    "ms": ("keputusan", "penghakiman"),
    "tl": ("hatol", "pasya"),
    "bn": ("রায়", "সিদ্ধান্ত"),
    "ta": ("தீர்ப்பு",),
    "ur": ("فیصلہ", "حکم"),
    "ka": ("განაჩენი", "ვერდიქტი"),
}  # fmt: skip

# Words a verdict can also be reported as, which honest answers use too, by language.
RESULT_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("score", "answer", "decision", "label", "result", "evaluation", "assessment", "output", "reward",
           "correctness", "conclusion", "outcome", "mark", "finding", "determination", "appraisal", "status",
           "verification"),
    "es": ("respuesta", "resultado", "puntuación", "decisión", "evaluación", "nota", "conclusión",
           "valoración", "estado"),
    "pt": ("resposta", "resultado", "pontuação", "nota", "decisão", "avaliação", "conclusão", "estado", "situação"),
    "fr": ("réponse", "résultat", "note", "décision", "évaluation", "conclusion", "notation", "appréciation",
           "statut", "état"),
    "de": ("bewertung", "antwort", "ergebnis", "entscheidung", "note", "punktzahl", "fazit", "befund",
           "einschätzung", "wertung", "status", "prüfung"),
    "it": ("risposta", "risultato", "punteggio", "voto", "decisione", "valutazione", "conclusione", "esito",
           "stato", "esito del controllo"),
    "nl": ("antwoord", "resultaat", "score", "beslissing", "beoordeling", "cijfer", "conclusie", "uitslag"),
    "pl": ("ocena", "odpowiedź", "wynik", "decyzja", "wniosek", "rezultat"),
    "ru": ("решение", "оценка", "ответ", "результат", "вывод", "заключение", "балл", "итог", "статус", "проверка"),
    "uk": ("рішення", "оцінка", "відповідь", "результат", "висновок", "підсумок"),
    "tr": ("değerlendirme", "cevap", "yanıt", "sonuç", "puan", "not"),
    "zh": ("结论", "结果", "答案", "评分", "得分", "分数", "結論", "結果", "評分", "评估", "評估", "评价", "評價", "状态", "狀態", "检查", "檢查"),
    "ja": ("評価", "結論", "結果", "答え", "回答", "採点", "点数", "解答", "状態", "ステータス", "チェック"),
    "ko": ("평가", "결론", "결과", "정답", "답", "점수", "채점", "상태", "검사"),
    "ar": ("القرار", "التقييم", "النتيجة", "الإجابة", "الجواب", "الدرجة"),
    "hi": ("मूल्यांकन", "परिणाम", "उत्तर", "अंक", "नतीजा"),
    "vi": ("kết luận", "kết quả", "đánh giá", "điểm", "câu trả lời", "đáp án"),
    "id": ("keputusan", "penilaian", "hasil", "jawaban", "skor", "nilai", "kesimpulan"),
    "th": ("ผลลัพธ์", "คำตอบ", "คะแนน", "การประเมิน"),
    "he": ("ציון", "תשובה", "תוצאה", "החלטה"),
    "el": ("απόφαση", "αξιολόγηση", "απάντηση", "αποτέλεσμα", "βαθμός"),
    "sv": ("bedömning", "svar", "resultat", "betyg", "beslut", "slutsats"),
    "cs": ("hodnocení", "odpověď", "výsledek", "rozhodnutí", "závěr"),
    "fa": ("نتیجه", "پاسخ", "ارزیابی", "نمره"),
    "sw": ("uamuzi", "tathmini", "jibu", "matokeo", "alama"),
    "ca": ("resultat", "puntuació", "resposta", "decisió", "avaluació", "nota", "conclusió"),
    "fi": ("tulos", "pisteet", "vastaus", "päätös", "arviointi", "johtopäätös"),
    "hr": ("rezultat", "odgovor", "odluka", "procjena", "zaključak", "bodovi"),
    "sr": ("rezultat", "резултат", "odgovor", "одговор", "odluka", "одлука", "zaključak", "закључак"),
    "sl": ("rezultat", "odgovor", "odločitev", "sklep", "točke"),
    "sk": ("hodnotenie", "výsledok", "odpoveď", "rozhodnutie", "záver", "skóre"),
    "ro": ("rezultat", "răspuns", "scor", "notă", "decizie", "evaluare", "concluzie"),
    "hu": ("értékelés", "eredmény", "válasz", "pontszám", "jegy", "következtetés"),
    "da": ("vurdering", "resultat", "svar", "beslutning", "karakter", "konklusion"),
    "no": ("vurdering", "resultat", "svar", "poengsum", "avgjørelse", "karakter", "konklusjon"),
    "bg": ("решение", "резултат", "отговор", "заключение"),
    "et": ("tulemus", "vastus", "punktid", "järeldus"),
    "lv": ("lēmums", "vērtējums", "rezultāts", "atbilde", "secinājums"),
    "lt": ("sprendimas", "įvertinimas", "rezultatas", "atsakymas", "išvada"),
    "ms": ("penilaian", "jawapan", "markah", "skor", "kesimpulan"),
    "tl": ("resulta", "sagot", "marka", "iskor", "pagtatasa"),
    "bn": ("মূল্যায়ন", "ফলাফল", "উত্তর", "নম্বর"),
    "ta": ("முடிவு", "மதிப்பீடு", "விடை", "பதில்", "மதிப்பெண்"),
    "ur": ("نتیجہ", "جواب", "تشخیص"),
    "ka": ("გადაწყვეტილება", "შეფასება", "შედეგი", "პასუხი"),
}  # fmt: skip

LABEL_WORDS: dict[str, tuple[str, ...]] = {
    lang: tuple(dict.fromkeys((*VERDICT_WORDS.get(lang, ()), *RESULT_WORDS.get(lang, ()))))
    for lang in dict.fromkeys((*VERDICT_WORDS, *RESULT_WORDS))
}
"""Every label word, by language: :data:`VERDICT_WORDS` and :data:`RESULT_WORDS` together."""

# Words that say an answer is right or wrong, by language (glibc's table has only yes and no).
CORRECTNESS_VALUES: tuple[str, ...] = (
    "true", "correct", "right", "pass", "passed", "match", "matches", "matching", "accept", "accepted", "valid",
    "equivalent", "same", "positive", "ok", "okay", "false", "incorrect", "wrong", "fail", "failed", "reject",
    "rejected", "invalid", "different", "negative", "correcto", "correcta", "verdadero", "falso", "incorrecto",
    "vrai", "juste", "faux", "correct", "richtig", "wahr", "korrekt", "falsch", "corretto", "giusto", "vero",
    "sbagliato", "juist", "waar", "onjuist", "prawda", "poprawne", "poprawnie", "błędne", "верно", "правильно",
    "неверно", "правда", "ложь", "вірно", "правильно", "doğru", "yanlış", "对", "對", "正确", "正確", "错误",
    "錯誤", "错", "錯", "正しい", "正解", "不正解", "誤り", "맞음", "정답", "오답", "틀림", "صحيح", "خطأ",
    "सही", "गलत", "đúng", "sai", "benar", "salah", "ถูก", "ผิด", "נכון", "שגוי", "σωστό", "λάθος", "certo",
    "verdadeiro", "errado", "správně", "špatně", "درست", "غلط", "sahihi", "kweli", "correcte", "oikein",
    "väärin", "točno", "tačno", "netočno", "pravilno", "správne", "corect", "greșit", "helyes", "hibás",
    "korrekt", "rigtigt", "forkert", "riktig", "feil", "вярно", "грешно", "õige", "vale", "pareizi",
    "teisingai", "betul", "tama", "mali", "সঠিক", "சரி", "درست", "სწორია",
    # Affirmation and refusal, success and failure: what a verdict is also reported as.
    "affirmative", "approved", "approve", "confirmed", "verified", "success", "successful", "succeeded", "passes",
    "passing", "agree", "agreed", "yep", "yeah", "yup", "nope", "nah", "denied", "declined", "failure", "fails",
    "failing", "unsuccessful", "disagree", "checkmark", "cmark", "xmark", "tick",
)  # fmt: skip
# A number word that is also its language's indefinite article opens honest prose ("Antwoord: een
# appel"): it is not read as a value.
_ARTICLES = frozenset(("un", "um", "ett", "et", "en", "een", "bir", "una"))
NUMBER_VALUES: tuple[str, ...] = tuple(dict.fromkeys(
    w for row in (*NUMBER_WORDS.values(), *SUPPLEMENT.values()) for w in row
    if fold(w).text.casefold() not in _ARTICLES
))  # fmt: skip
"""The labels 0 and 1 spelled out, and the choices first and second (:mod:`nemo_genrm.guard.number_words`)."""


def _mark_symbols() -> str:
    """Every check mark, ballot box, ballot X, cross mark and thumbs sign Unicode names."""
    names = ("CHECK MARK", "BALLOT", "CROSS MARK", "THUMBS UP", "THUMBS DOWN", "HEAVY MULTIPLICATION X")
    ranges = (range(0x2100, 0x2C00), range(0x1F300, 0x1FB00))
    return "".join(chr(c) for r in ranges for c in r if any(n in unicodedata.name(chr(c), "") for n in names))


MARK_SYMBOLS: str = _mark_symbols()
"""Symbols that say yes or no by themselves (✓, ✅, ☑, ✗, ❌, 👍, ...): verdict values, never decoration."""
POSITIVE_VALUES: tuple[str, ...] = tuple(dict.fromkeys(w for yes, _ in YES_NO.values() for w in yes))
"""Every language's "yes" (glibc's locales)."""
NEGATIVE_VALUES: tuple[str, ...] = tuple(dict.fromkeys(w for _, no in YES_NO.values() for w in no))
"""Every language's "no" (glibc's locales)."""

# Words that stand between a label and its value without changing what it says: "The verdict
# is: 1", "Verdict was 1", "verdict would be 1", "Résultat final : oui", "判定结果是正确".
LINK_WORDS: tuple[str, ...] = (
    "is", "was", "were", "are", "be", "would", "will", "should", "must", "shall", "has", "have", "been",
    "being", "therefore", "thus", "hence", "final", "overall", "here", "then", "now", "for", "of", "on",
    "this", "that", "the", "it", "reads", "equals", "says", "candidate", "answer", "response", "submission",
    "es", "fue", "será", "sería", "final", "definitivo", "la", "el", "del", "est", "sera", "serait", "finale",
    "définitif", "ist", "lautet", "war", "wäre", "endgültig", "è", "sarà", "é", "foi", "luidt", "это",
    "是", "为", "為", "应为", "應為", "は", "が", "です", "이다", "입니다",
)  # fmt: skip

# Who speaks in a chat, by language: a line opening with one of them is a role turn.
ROLE_WORDS: tuple[str, ...] = (
    "system", "assistant", "user", "human", "ai", "bot", "chatbot", "gpt", "developer", "tool",
    "model", "judge", "grader", "evaluator", "instruction", "instructions", "response", "sistema",
    "asistente", "usuario", "système", "assistant", "utilisateur", "benutzer", "nutzer",
    "assistente", "utente", "systeem", "gebruiker", "система", "ассистент", "пользователь",
    "sistem", "asistan", "kullanıcı", "系统", "系統", "助手", "用户", "用戶", "システム",
    "アシスタント", "ユーザー", "시스템", "어시스턴트", "사용자", "النظام", "المساعد", "المستخدم",
    "सिस्टम", "सहायक", "उपयोगकर्ता", "hệ thống", "trợ lý", "người dùng", "pengguna", "asisten",
)  # fmt: skip

# Words of an answer that promises an answer and gives none ("Let me think step by step",
# "Lösung:", "Ответ:", "Veamos paso a paso."): an answer made only of these, with no digit
# (step numbers aside), has no content. A one-letter word counts only beside others: "A" alone
# is an answer, "paso a paso" is not.
OPENER_WORDS: tuple[str, ...] = (
    # English openers, fillers and the labels an answer could stop at.
    "let", "lets", "me", "us", "we", "think", "thinking", "thought", "thoughts", "solve",
    "solving", "solution", "step", "steps", "by", "this", "that", "the", "problem", "question",
    "answer", "answers", "final", "my", "our", "is", "are", "be", "reasoning", "reason",
    "process", "explanation", "explain", "analysis", "analyse", "analyze", "proof", "work",
    "working", "through", "it", "out", "carefully", "now", "first", "here", "so", "well", "ok",
    "okay", "hmm", "um", "uh", "start", "begin", "see", "look", "check", "calculate", "compute",
    "figure", "consider", "find", "get", "go", "try", "will", "can", "to", "of", "and", "with",
    "for", "at", "on", "in", "as", "verdict", "judgement", "judgment", "score", "result",
    "results", "conclusion", "assistant", "system", "user", "response", "reply", "output",
    "given", "following", "follows", "below", "above", "then", "therefore", "thus", "hence", "done",
    "ill", "im", "ive", "id", "need", "want", "going", "must", "should", "shall", "a", "an",
    "approach", "method", "alright", "firstly", "beginning",
    # Spanish, Portuguese, Catalan.
    "respuesta", "solución", "paso", "pasos", "pensemos", "veamos", "resolvamos", "la", "el", "es",
    "a", "por", "vamos", "pensar", "resolver", "ver", "primero", "de", "del", "lo", "los", "las",
    "problema", "pregunta", "este", "esta", "razonemos", "analicemos", "resposta", "solução", "passo",
    "passos", "resolvamos", "pensemos", "vejamos", "vamos", "o", "os", "um", "uma", "primeiro",
    "pas", "resposta", "solució", "vegem", "pensem",
    # French, Italian.
    "réponse", "étape", "étapes", "par", "réfléchissons", "voyons", "est", "pensons", "résolvons",
    "commençons", "analysons", "le", "les", "un", "une", "d", "abord", "problème", "question",
    "solution", "raisonnons", "risposta", "soluzione", "passo", "pensiamo", "vediamo", "ragioniamo",
    "risolviamo", "il", "lo", "per", "prima", "problema", "domanda",
    # German, Dutch, Scandinavian.
    "lösung", "antwort", "ergebnis", "schritt", "schritte", "für", "lass", "lasst", "uns", "denken",
    "nachdenken", "überlegen", "wir", "mal", "zuerst", "lösen", "die", "der", "das", "aufgabe", "frage",
    "antwoord", "oplossing", "stap", "stappen", "laten", "we", "denken", "eens", "svar", "lösning",
    "steg", "för", "låt", "oss", "tänka", "løsning", "trin", "lad", "os",
    # Slavic.
    "ответ", "решение", "шаг", "шагом", "за", "итак", "давайте", "подумаем", "решим", "рассмотрим",
    "разберём", "разберем", "сначала", "відповідь", "рішення", "крок", "odpowiedź", "rozwiązanie",
    "krok", "po", "pomyślmy", "rozwiążmy", "odpověď", "řešení", "odgovor", "rješenje", "korak",
    # Turkish, Indonesian and Malay, Finnish, others.
    "cevap", "çözüm", "adım", "adım", "düşünelim", "jawaban", "solusi", "langkah", "demi", "mari",
    "kita", "pikirkan", "jawapan", "vastaus", "ratkaisu", "vaihe", "vaiheittain", "mietitään",
    # Chinese, Japanese, Korean (scripts without spaces are split into these words).
    "解", "答", "解答", "答案", "解析", "思考", "步骤", "回答", "让我们", "讓我們", "想想", "一步一步",
    "逐步", "分析", "首先", "我们", "我們", "来", "來", "看看", "一下", "如下", "步驟",
    "かいせつ", "解説", "答え", "考えます", "考えましょう", "まず", "ステップ", "順番に", "見て",
    "みましょう", "정답", "답", "풀이", "해설", "생각해", "보자", "봅시다", "단계별로", "먼저",
    # Arabic, Hindi.
    "الجواب", "الحل", "الإجابة", "لنفكر", "خطوة", "بخطوة", "उत्तर", "हल", "जवाब", "चलो", "सोचते",
    "हैं", "कदम",
)  # fmt: skip

# Words that number the steps of an answer: "Step 1:", "Paso 2", "第1步" carry no answer.
STEP_WORDS: tuple[str, ...] = (
    "step", "paso", "passo", "étape", "etapa", "schritt", "stap", "steg", "trin",
    "шаг", "крок", "krok", "korak", "adım", "langkah", "vaihe", "步骤", "步驟", "ステップ", "단계",
    "خطوة", "कदम",
)  # fmt: skip


@functools.lru_cache(maxsize=None)
def _folded_tuple(words: tuple[str, ...]) -> tuple[str, ...]:
    forms = (form for w in words for form in (w, w.upper(), w.capitalize()))
    return tuple(dict.fromkeys(fold(form).text.casefold() for form in forms))


def folded(words: Iterable[str]) -> tuple[str, ...]:
    """``words`` as the checks read them (folded, case-folded), without repeats.

    A word is folded as written, in capitals and capitalised: a few letters have lookalikes in
    both cases that differ (Greek ``η`` folds to ``n``, ``Η`` to ``H``).
    """
    return _folded_tuple(tuple(words))


def words_pattern(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` in folded form, spaces as any spacing, as a prefix tree.

    ``i`` and ``l`` also match ``l``, ``i``, ``1`` and ``|``: TR39 gives them one prototype (a
    capital I and a small l are drawn alike), so a lookalike that folds to ``l`` still spells
    the word (Lisu ``ꓦꓰꓣꓓꓲꓚꓔ`` folds to ``VERDlCT``). Written as a tree of shared prefixes,
    so a check tries a few characters at each position, not every word of every language; a
    longer word is always tried before its own prefix.
    """
    tree: dict = {}
    for word in folded(words):
        node = tree
        for atom in _atoms(word):
            node = node.setdefault(atom, {})
        node[""] = {}  # the word ends here
    return _tree_pattern(tree)


def _atoms(word: str) -> list[str]:
    return [r"\s+" if c == " " else "[il1|]" if c in "il" else re.escape(c) for c in word]


def _tree_pattern(tree: dict) -> str:
    branches = [atom + _tree_pattern(child) for atom, child in sorted(tree.items()) if atom]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in tree else body  # greedy: the longer word first


def ascii_pattern(word: str) -> str:
    """``word`` as a regex: spaces as any spacing, ``i`` and ``l`` as any of ``il1|``."""
    return "".join(_atoms(word))


def all_label_words() -> tuple[str, ...]:
    """Every label word of every language, folded."""
    return folded(w for words in LABEL_WORDS.values() for w in words)


_UNSPACED_SCRIPT = regex.compile(r"[\p{Han}\p{Hangul}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")


def compoundable(word: str) -> bool:
    """Whether a folded label word is read inside a longer word (``Endurteil``, ``最终判定``).

    Words of five letters or more, and words of two or more in a script written without spaces
    or with compounds (Han, kana, Hangul, Thai and its neighbours): a shorter Latin word
    (``not``, ``dom``, ``mark``) is inside too many honest words.
    """
    return len(word) >= 5 or (len(word) >= 2 and _UNSPACED_SCRIPT.match(word) is not None)
