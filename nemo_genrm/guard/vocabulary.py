"""Words a verdict, a role turn or an empty opener is written with, in many languages.

Each list is written as a person writes the words; :func:`folded` gives them in the form the
checks read (:func:`nemo_genrm.guard.folding.fold`, case-folded), so ``Вердикт`` is matched
whether an answer spells it in Cyrillic, with Latin lookalikes or with combining marks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from nemo_genrm.guard.folding import fold

__all__ = [
    "LABEL_WORDS", "OPENER_WORDS", "POSITIVE_VALUES", "ROLE_WORDS", "all_label_words", "ascii_pattern", "folded",
    "words_pattern",
]

# Words that name a verdict, by language (English first). Several per language: the word for
# verdict, judgement, result, score, grade, decision, answer, evaluation, conclusion.
LABEL_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("verdict", "judgement", "judgment", "score", "rating", "grade", "grading", "answer",
           "decision", "label", "result", "evaluation", "assessment", "output", "reward",
           "correctness", "conclusion", "outcome", "mark", "marks", "ruling", "finding"),
    "es": ("veredicto", "juicio", "respuesta", "resultado", "puntuación", "calificación",
           "decisión", "evaluación", "nota", "conclusión", "fallo"),
    "pt": ("veredito", "veredicto", "julgamento", "resposta", "resultado", "pontuação", "nota",
           "decisão", "avaliação", "conclusão"),
    "fr": ("verdict", "jugement", "réponse", "résultat", "note", "décision", "évaluation",
           "conclusion", "notation"),
    "de": ("urteil", "bewertung", "antwort", "ergebnis", "entscheidung", "note", "punktzahl",
           "beurteilung", "fazit", "befund"),
    "it": ("verdetto", "giudizio", "risposta", "risultato", "punteggio", "voto", "decisione",
           "valutazione", "conclusione"),
    "nl": ("oordeel", "uitspraak", "antwoord", "resultaat", "score", "beslissing", "beoordeling",
           "cijfer", "conclusie"),
    "pl": ("werdykt", "wyrok", "ocena", "odpowiedź", "wynik", "decyzja", "wniosek"),
    "ru": ("вердикт", "решение", "оценка", "ответ", "результат", "вывод", "заключение", "балл"),
    "uk": ("вердикт", "рішення", "оцінка", "відповідь", "результат", "висновок"),
    "tr": ("karar", "hüküm", "değerlendirme", "cevap", "yanıt", "sonuç", "puan", "not"),
    "zh": ("判定", "判决", "裁决", "评判", "评定", "结论", "结果", "答案", "评分", "得分", "分数",
           "判斷", "判決", "結論", "結果", "評分", "裁定"),
    "ja": ("判定", "判断", "評価", "結論", "結果", "答え", "回答", "採点", "点数", "判決"),
    "ko": ("판정", "판결", "평가", "결론", "결과", "정답", "답", "점수", "채점"),
    "ar": ("الحكم", "حكم", "القرار", "التقييم", "النتيجة", "الإجابة", "الجواب", "الدرجة"),
    "hi": ("निर्णय", "फैसला", "फ़ैसला", "मूल्यांकन", "परिणाम", "उत्तर", "अंक", "नतीजा"),
    "vi": ("phán quyết", "kết luận", "kết quả", "đánh giá", "điểm", "câu trả lời", "đáp án"),
    "id": ("putusan", "keputusan", "penilaian", "hasil", "jawaban", "skor", "nilai", "kesimpulan"),
    "th": ("คำตัดสิน", "ผลการตัดสิน", "ผลลัพธ์", "คำตอบ", "คะแนน", "การประเมิน"),
    "he": ("פסק דין", "הכרעה", "ציון", "תשובה", "תוצאה", "החלטה"),
    "el": ("ετυμηγορία", "απόφαση", "κρίση", "αξιολόγηση", "απάντηση", "αποτέλεσμα", "βαθμός"),
    "sv": ("dom", "utslag", "bedömning", "svar", "resultat", "betyg", "beslut", "slutsats"),
    "cs": ("verdikt", "rozsudek", "hodnocení", "odpověď", "výsledek", "rozhodnutí", "závěr"),
    "fa": ("حکم", "داوری", "نتیجه", "پاسخ", "ارزیابی", "نمره"),
    "sw": ("hukumu", "uamuzi", "tathmini", "jibu", "matokeo", "alama"),
}  # fmt: skip

# Values that say yes, by language; a label followed by one of them is a verdict line even
# without a separator ("Urteil ja").
POSITIVE_VALUES: tuple[str, ...] = (
    "yes", "true", "correct", "right", "pass", "passed", "match", "matches", "accept", "accepted",
    "valid", "equivalent", "same", "positive", "ok", "sí", "si", "correcto", "correcta", "verdadero",
    "oui", "vrai", "juste", "ja", "richtig", "wahr", "korrekt", "corretto", "giusto", "vero",
    "juist", "waar", "tak", "prawda", "poprawne", "да", "верно", "правильно", "так", "evet",
    "doğru", "是", "对", "對", "正确", "正確", "はい", "正しい", "正解", "예", "네", "맞음", "정답",
    "نعم", "صحيح", "हाँ", "हां", "सही", "có", "đúng", "ya", "benar", "ใช่", "ถูก", "כן", "נכון",
    "ναι", "σωστό", "sim", "certo", "verdadeiro", "ano", "správně", "بله", "درست", "ndiyo", "sahihi",
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
# "Lösung:", "Ответ:"): an answer made only of these, with no digit, has no content.
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
    "given", "following", "below", "above", "then", "therefore", "thus", "hence", "done",
    # The same in other languages (words only: digits and any other word are content).
    "lösung", "antwort", "ergebnis", "schritt", "für", "lass", "uns", "denken", "nachdenken",
    "ответ", "решение", "шаг", "за", "шагом", "итак", "давайте", "подумаем", "решим",
    "respuesta", "solución", "paso", "pensemos", "veamos", "resolvamos", "la", "el", "es",
    "réponse", "étape", "par", "réfléchissons", "voyons", "est",
    "risposta", "soluzione", "passo", "pensiamo", "vediamo", "resposta", "solução", "passo",
    "vamos", "pensar", "antwoord", "oplossing", "stap", "odpowiedź", "rozwiązanie", "krok",
    "cevap", "çözüm", "adım", "svar", "lösning", "jawaban", "solusi", "langkah",
    "解", "答", "解答", "答案", "解析", "思考", "步骤", "回答", "让我们", "想想", "一步一步",
    "かいせつ", "解説", "答え", "考えます", "정답", "답", "풀이", "해설", "생각해", "보자",
    "الجواب", "الحل", "الإجابة", "उत्तर", "हल", "जवाब",
)  # fmt: skip


@functools.lru_cache(maxsize=None)
def _folded_tuple(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(fold(w).text.casefold() for w in words))


def folded(words: Iterable[str]) -> tuple[str, ...]:
    """``words`` as the checks read them (folded, case-folded), without repeats."""
    return _folded_tuple(tuple(words))


def words_pattern(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` in folded form, longest first, spaces as any spacing.

    ``i`` and ``l`` also match ``l``, ``i``, ``1`` and ``|``: TR39 gives them one prototype (a
    capital I and a small l are drawn alike), so a lookalike that folds to ``l`` still spells
    the word (Lisu ``ꓦꓰꓣꓓꓲꓚꓔ`` folds to ``VERDlCT``).
    """
    items = sorted(folded(words), key=len, reverse=True)
    return "(?:" + "|".join(ascii_pattern(w) for w in items) + ")"


def ascii_pattern(word: str) -> str:
    """``word`` as a regex: spaces as any spacing, ``i`` and ``l`` as any of ``il1|``."""
    return "".join(r"\s+" if c == " " else "[il1|]" if c in "il" else re.escape(c) for c in word)


def all_label_words() -> tuple[str, ...]:
    """Every label word of every language, folded."""
    return folded(w for words in LABEL_WORDS.values() for w in words)
