"""``python -m course_lib.evaluation.sandbox <command>``: status | runtime | daemon | image | stop-daemon | run FILE [TESTS].

* ``status``      which backends work here, and why not
* ``runtime``     build the read-only numpy/pandas runtime the sandbox's Python imports (both backends)
* ``daemon``      start the course's own dockerd if no Docker daemon answers (needs root)
* ``image``       start the daemon if needed and build the ``python-sandbox`` image offline (docker import)
* ``stop-daemon`` stop the course's dockerd (the one whose pid is in /run/course-sandbox/dockerd.pid)
* ``run``         run one file (and a tests file) in the sandbox and print the result

Introduced in lesson 06.
"""
from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_lib.evaluation.sandbox", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["status", "runtime", "daemon", "image", "stop-daemon", "run"])
    p.add_argument("files", nargs="*", help="run: the code file, then optionally a tests file")
    p.add_argument("--backend", default=None)
    p.add_argument("--profile", default=None,
                   help="the profile whose sandbox.backend is the configured backend (default: $COURSE_PROFILE or ci)")
    p.add_argument("--timeout", type=float, default=None, help="seconds (default: 10)")
    args = p.parse_args(argv)
    from course_lib.evaluation import sandbox
    from course_lib.evaluation.sandbox import docker
    from course_lib.profiles import get_profile

    # the command line is where the profile is resolved (once): its sandbox.backend is the configured backend
    configured = get_profile(args.profile).sandbox.backend if args.command in ("status", "run") else None
    if args.command == "status":
        for name, state in sandbox.available_backends().items():
            print(f"{name:<7} {state}")
        try:
            print(f"auto -> {sandbox.resolve_backend('auto', configured=configured)} (configured: {configured})")
        except RuntimeError as exc:
            print(f"auto -> none: {exc}")
        import shutil

        from course_lib.evaluation.sandbox.cpp import COMPILER
        print(f"C++     {'g++ at ' + COMPILER if shutil.which(COMPILER) else 'no g++: `apt-get install g++` (as root)'}")
        return 0
    if args.command == "runtime":
        from course_lib.evaluation.sandbox.runtime import build_runtime

        print(f"sandbox runtime built at {build_runtime()}")
        return 0
    if args.command == "daemon":
        d = docker.start_daemon()
        print(f"Docker daemon answers at {d.host or 'the default socket'}" + (f" (started, pid {d.pid})" if d.started else ""))
        return 0
    if args.command == "image":
        from course_lib.evaluation.sandbox.runtime import build_runtime, runtime_site_packages

        if runtime_site_packages() is None:
            build_runtime()
        d = docker.ensure_docker(build=False)
        name = docker.build_image(d.host)
        print(f"built image {name!r} offline with docker import on {d.host or 'the default daemon'}")
        return 0
    if args.command == "stop-daemon":
        pidfile = docker.RUN_DIR / "dockerd.pid"
        if not pidfile.exists():
            print("the course's dockerd is not running")
            return 0
        docker.Daemon(host=None, started=True, pid=int(pidfile.read_text().strip())).stop()
        print("stopped the course's dockerd")
        return 0
    if not args.files:
        p.error("run needs a code file")
    code = open(args.files[0]).read()
    tests = open(args.files[1]).read() if len(args.files) > 1 else None
    r = sandbox.run_code(code, tests, timeout_s=args.timeout,
                         backend=sandbox.resolve_backend(args.backend, configured=configured))
    print(r)
    if r.stdout:
        print("--- stdout\n" + r.stdout)
    if r.stderr:
        print("--- stderr\n" + r.stderr)
    return 0 if r.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
