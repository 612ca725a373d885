"""Secret/PII detection: course_lib.data.redaction vs Yelp's detect-secrets on the same inputs.

1. The labelled set (assets/secrets/labelled_cases.jsonl; fake values filled at run time), per split:
   "dev" (the course's rules were tuned on it) and "heldout" (written afterwards, not tuned on).
   detect-secrets has no e-mail detector, so the comparison counts keys, passwords and IPs only;
   the course's own scores are also printed with e-mails.
2. Speed on real files: raw (unredacted) files of the ci corpus's repositories.
3. Worst cases: one ~100 KB line built to defeat backtracking (repeated secret words, BEGIN markers,
   dotted numbers, ``@`` + labels); the course's scanner is linear, so each takes milliseconds.

Prints ratios course / detect-secrets measured in this run. Run:
    PYTHONPATH=$PWD python benchmarks/bench_secrets.py [--files 100]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from course_lib.data.redaction_eval import course_detector, detect_secrets_detector, evaluate, labelled_cases

SHARED = ("key", "password", "ip")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "inf"


def labelled_comparison() -> None:
    cases = labelled_cases()
    print(f"labelled set: {len(cases)} cases ({sum(c.is_negative for c in cases)} hard negatives)")
    header = f"{'split':<8} {'detector':<15} {'P':>6} {'R':>6} {'F1':>6} {'TP':>4} {'FP':>4} {'FN':>4} {'s':>7}"
    print(header)
    print("-" * len(header))
    for split in ("dev", "heldout", "all"):
        part = [c for c in cases if split == "all" or c.split == split]
        ours_all = evaluate(course_detector, part, "course (all)")
        ours = evaluate(course_detector, part, "course", categories=SHARED)
        theirs = evaluate(detect_secrets_detector, part, "detect-secrets", categories=SHARED)
        for s in (ours_all, ours, theirs):
            r = s.row()
            print(f"{split:<8} {s.name:<15} {r['precision']:>6.3f} {r['recall']:>6.3f} {r['f1']:>6.3f} "
                  f"{r['tp']:>4} {r['fp']:>4} {r['fn']:>4} {r['seconds']:>7.3f}")
        print(f"{split:<8} ratio course/detect-secrets (keys+passwords+IPs): precision "
              f"{_ratio(ours.precision, theirs.precision)}, recall {_ratio(ours.recall, theirs.recall)}, "
              f"F1 {_ratio(ours.f1, theirs.f1)}, speed {_ratio(theirs.seconds, ours.seconds)}")
        for c in SHARED:
            print(f"{'':<8}   recall {c:<9} course {ours.per_category[c]['recall']}  "
                  f"detect-secrets {theirs.per_category[c]['recall']}")
    held = evaluate(course_detector, [c for c in cases if c.split == "heldout"], "course")
    print("course mistakes on the held-out split:")
    for m in held.mistakes:
        print(f"  {m['case']:<12} {m['type']:<15} {m['category']:<9} {m['note']}")


def real_file_speed(n_files: int) -> None:
    from course_lib.data.corpus import select_corpus_repos
    from course_lib.data.filters import read_source_file

    _, sel = select_corpus_repos("ci")
    texts = []
    for repo in sel.kept:
        for rel in repo.files[:5]:
            text, why = read_source_file(Path(repo.root) / rel)
            if text is not None and text.strip():
                texts.append((text, rel.rsplit(".", 1)[-1]))
        if len(texts) >= n_files:
            break
    texts = texts[:n_files]
    mb = sum(len(t) for t, _ in texts) / 1e6
    t0 = time.perf_counter()
    ours = sum(len(course_detector(t, e)) for t, e in texts)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = sum(len(detect_secrets_detector(t, e)) for t, e in texts)
    t_theirs = time.perf_counter() - t0
    print(f"\nreal files: {len(texts)} raw files ({mb:.1f} MB) from the ci repositories")
    print(f"  course          {t_ours:7.2f} s  {len(texts) / t_ours:8.1f} files/s  {ours} findings")
    print(f"  detect-secrets  {t_theirs:7.2f} s  {len(texts) / t_theirs:8.1f} files/s  {theirs} findings")
    print(f"  ratio course/detect-secrets speed: {_ratio(t_theirs, t_ours)} "
          f"(its time is the per-line plugin engine; the temp file costs little)")


def long_line_cost() -> None:
    from course_lib.data.redaction import redact_secrets

    print("\none ~100 KB line, course_lib.redact_secrets:")
    for label, text in (("'token' * 20000", "token" * 20000), ("'secret' * 17000", "secret" * 17000),
                        ("'password = ' * 9000", "password = " * 9000),
                        ("BEGIN marker + 50 chars, x1300", ("-----BEGIN RSA PRIVATE KEY-----" + "A" * 50) * 1300),
                        ("'x@' + 'a.' * 50000", "x@" + "a." * 50000), ("'1.1.1.' * 17000", "1.1.1." * 17000)):
        t0 = time.perf_counter()
        redact_secrets(text)
        print(f"  {label:<32} {len(text):>7,} chars  {1000 * (time.perf_counter() - t0):7.1f} ms")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=100, help="real files for the speed comparison")
    args = p.parse_args(argv)
    long_line_cost()
    try:
        import detect_secrets  # noqa: F401
    except ImportError:
        print("detect-secrets is not installed: pip install -e '.[dev]' (skipping the comparison)")
        return 0
    labelled_comparison()
    if args.files:
        real_file_speed(args.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
