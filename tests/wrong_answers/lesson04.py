"""Plausible wrong answers to lesson 04's exercises."""


def psm_without_eot(p, m, s, st):
    return st.prefix + p + st.suffix + s + st.middle + m


def psm_middle_before_suffix(p, m, s, st):
    return st.prefix + p + st.middle + m + st.suffix + s + st.eot


def psm_spaces_between(p, m, s, st):
    return " ".join([st.prefix, p, st.suffix, s, st.middle, m]) + st.eot


def psm_hardcoded_starcoder(p, m, s, st):
    return "<fim_prefix>" + p + "<fim_suffix>" + s + "<fim_middle>" + m + "<|endoftext|>"


def spm_bigcode_only(p, m, s, st, layout="lecture"):
    return st.prefix + st.suffix + s + st.middle + p + m + st.eot


def spm_lecture_only(p, m, s, st, layout="lecture"):
    return st.suffix + s + st.prefix + p + st.middle + m + st.eot


def spm_layouts_swapped(p, m, s, st, layout="lecture"):
    if layout == "bigcode":
        return st.suffix + s + st.prefix + p + st.middle + m + st.eot
    return st.prefix + st.suffix + s + st.middle + p + m + st.eot


def spm_bigcode_without_prefix_sentinel(p, m, s, st, layout="lecture"):
    if layout == "bigcode":
        return st.suffix + s + st.middle + p + m + st.eot
    return st.suffix + s + st.prefix + p + st.middle + m + st.eot


def labels_include_eot(ids, mid, eot):
    out, inside = [], False
    for t in ids:
        out.append(t if inside else -100)
        if t == mid:
            inside = True
        if t == eot:
            inside = False
    return out


def labels_include_mid(ids, mid, eot):
    out, inside = [], False
    for t in ids:
        if t == mid:
            inside = True
        if t == eot:
            inside = False
        out.append(t if inside else -100)
    return out


def labels_first_document_only(ids, mid, eot):
    out, inside, done = [], False, False
    for t in ids:
        if t == eot:
            inside, done = False, True
        out.append(t if inside else -100)
        if t == mid and not done:
            inside = True
    return out


def labels_zero_not_minus_100(ids, mid, eot):
    out, inside = [], False
    for t in ids:
        if t == eot:
            inside = False
        out.append(t if inside else 0)
        if t == mid:
            inside = True
    return out


WRONG_ANSWERS = {
    "04-1": [psm_without_eot, psm_middle_before_suffix, psm_spaces_between, psm_hardcoded_starcoder],
    "04-2": [spm_bigcode_only, spm_lecture_only, spm_layouts_swapped, spm_bigcode_without_prefix_sentinel],
    "04-3": [labels_include_eot, labels_include_mid, labels_first_document_only, labels_zero_not_minus_100],
}
