"""A separate process that charges a shared query budget or appends to a shared ledger file.

Run by tests/accounting/test_concurrency.py as ``python _state_worker.py MODE PATH GO [COUNT]``:

* ``budget``: charge one query at a time until the budget is exhausted; print the number answered.
* ``ledger``: record COUNT releases; print COUNT.
* ``budget-acks`` / ``ledger-acks``: charge / record forever, printing ``ack N`` (the count the
  state file holds after the acknowledged write) after each, until killed.

Every mode waits until the file GO exists, so that all workers start together. The worker imports
only ``tfdpmech.accounting``'s state modules (not TensorFlow): the package ``__init__`` files are
bypassed so that a process starts in a fraction of a second.
"""

from __future__ import annotations

import os
import sys
import time
import types


def _import_accounting():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name, sub in (("tfdpmech", "tfdpmech"), ("tfdpmech.accounting", os.path.join("tfdpmech", "accounting"))):
        module = types.ModuleType(name)
        module.__path__ = [os.path.join(root, sub)]
        sys.modules[name] = module
    from tfdpmech.accounting import ledger, query_budget

    return ledger, query_budget


def main(argv):
    mode, path, go = argv[1], argv[2], argv[3]
    count = int(argv[4]) if len(argv) > 4 else 0
    ledger_mod, budget_mod = _import_accounting()
    open(f"{go}.ready.{os.getpid()}", "w").close()  # imports done: the test may start everyone at once
    while not os.path.exists(go):
        time.sleep(0.002)
    if mode.startswith("budget"):
        acct = budget_mod.QueryBudgetAccountant(1.0, max_queries=count, state_path=path)
        answered = 0
        while True:
            try:
                acct.charge(1)
            except budget_mod.BudgetExhaustedError:
                break
            answered += 1
            if mode == "budget-acks":
                print(f"ack {acct.queries_answered}", flush=True)
        print(answered, flush=True)
        return
    led = ledger_mod.PrivacyLedger.open(path)
    pid = os.getpid()
    i = 0
    while mode == "ledger-acks" or i < count:
        led.record(ledger_mod.Release(f"query_{pid}_{i}", "laplace", 0.01, 0.01, "Laplace mechanism"))
        i += 1
        if mode == "ledger-acks":
            print(f"ack {len(led)}", flush=True)
    print(i, flush=True)


if __name__ == "__main__":
    main(sys.argv)
