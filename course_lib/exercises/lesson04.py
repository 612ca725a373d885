"""Lesson 04's exercises (fill-in-the-middle): the PSM layout, the SPM layout in both the lecture's
and bigcode's form, and the middle-only labels of L_FIM."""
from __future__ import annotations

from course_lib.exercises import Exercise
from course_lib.training import fim

STARCODER, QWEN = fim.get_sentinels("starcoder"), fim.get_sentinels("qwen2.5-coder")
EXAMPLE = ("def add(a, b):\n    ", "return a + b", "\n\nprint(add(1, 2))\n")
PRE, SUF, MID, EOT = 90, 91, 92, 0


def psm_reference(prefix, middle, suffix, sentinels):
    """``<PRE> prefix <SUF> suffix <MID> middle <EOT>``."""
    return fim.psm_transform(prefix, middle, suffix, sentinels)


def spm_reference(prefix, middle, suffix, sentinels, layout="lecture"):
    """SPM in the lecture's layout or bigcode's (:func:`course_lib.training.fim.spm_transform`)."""
    return fim.spm_transform(prefix, middle, suffix, sentinels, layout=layout)


EXERCISES = [
    Exercise(
        id="04-1", name="my_psm_transform", reference=psm_reference,
        cases=[(*EXAMPLE, STARCODER), (*EXAMPLE, QWEN), ("", "x = 1", "", STARCODER),
               ("if x:\n", "    pass\n", "", QWEN), ("a", "b", "c", STARCODER), ("pre", "", "suf", QWEN)],
        description="PSM: prefix, suffix, then the middle, each after its sentinel, ending in <EOT>."),
    Exercise(
        id="04-2", name="my_spm_transform", reference=spm_reference,
        cases=[(*EXAMPLE, STARCODER, "lecture"), (*EXAMPLE, QWEN, "bigcode"),
               ("a", "b", "c", STARCODER, "lecture"), ("a", "b", "c", STARCODER, "bigcode"),
               ("a", "", "c", QWEN, "lecture"), ("", "m", "", QWEN, "bigcode"),
               ("p", "m", "s", QWEN, "lecture")],
        description="SPM: lecture <SUF>s<PRE>p<MID>m<EOT>; bigcode <PRE><SUF>s<MID>pm<EOT>."),
    Exercise(
        id="04-3", name="my_middle_only_labels", reference=fim.middle_only_labels,
        cases=[([PRE, 5, 6, SUF, 7, MID, 8, 9, EOT], MID, EOT),
               ([PRE, 5, SUF, 7, MID, 8, EOT, 3, 4, EOT, PRE, SUF, MID, 1, 2, EOT], MID, EOT),
               ([3, 4, 5], MID, EOT),
               ([PRE, 1, SUF, 2, MID, 3, 4], MID, EOT),
               ([MID, EOT, 7, MID, 8], MID, EOT)],
        description="Labels: the token id on middle tokens (after <MID>, before <EOT>), -100 elsewhere."),
]
