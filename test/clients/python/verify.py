"""Checks what the Celery worker ran against the producers' plans (test/e2e/clients_python.sh):
committed tasks once, rolled-back ones never, eta / countdown not early, the Celery queue asked
for, Floats (1e16) as floats, text intact.
    python verify.py RAN.jsonl EXPECTED.json..."""
import json
import sys
from collections import defaultdict

from plan import check

ran_file, *plans = sys.argv[1:]
want = [job for p in plans for job in json.load(open(p))]
by_token = defaultdict(list)
for line in open(ran_file):
    r = json.loads(line)
    by_token[r["args"][0]].append(r)

problems = defaultdict(list)
for e in want:
    runs = by_token.pop(e["token"], [])
    if not e["committed"]:
        if runs:
            problems["rolled_back"].append(e["token"])
        continue
    if len(runs) != 1:
        problems["count"].append(f"{e['token']}: {len(runs)} runs")
        continue
    r = runs[0]
    if r["routing_key"] != e["queue"]:
        problems["queue"].append(f"{e['token']} from {r['routing_key']}")
    if e["not_before"] and r["ran_at"] < e["not_before"]:
        problems["early"].append(f"{e['token']} {e['not_before'] - r['ran_at']:.3f} s early")
    if r["args"][1] != {"text": "é ✓ \"q\""}:
        problems["text"].append(e["token"])
    if e["floats"] and not (r["args"][2] == [1e16, 1.5, -2.5e20] and all(isinstance(v, float) for v in r["args"][2])):
        problems["floats"].append(f"{e['token']}: {r['args'][2]!r}")

committed = sum(1 for e in want if e["committed"])
check(0 < committed < len(want), f"committed ({committed}) and rolled-back ({len(want) - committed}) tasks planned")
check(sum(1 for e in want if e["committed"] and e["not_before"]) > 5, "some committed tasks had an eta or countdown")
for key, what in [("count", "every committed task ran exactly once"), ("rolled_back", "no rolled-back task ran"),
                  ("queue", "each ran from the Celery queue it was sent to"), ("early", "no eta / countdown task ran early"),
                  ("text", "unicode and quotes intact"), ("floats", "1e16 arrived as a float")]:
    check(not problems[key], what, "; ".join(problems[key][:5]))
check(not by_token, "the worker ran nothing else", ", ".join(list(by_token)[:5]))
sys.exit(1 if __import__("plan").failures else 0)
