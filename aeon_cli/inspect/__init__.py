"""``aeon inspect``: every recorded run in the browser, offline, from the data Aeon already keeps (issue 15).

A local web app on 127.0.0.1 — the standard library's HTTP server, Jinja templates (autoescaped) and a few lines
of vanilla JavaScript shipped in the wheel; the page loads nothing from anywhere else. It reads the state store
``aeon run`` records into (or ``[state]``'s) and JSONL logs given on the command line, and never writes to a run.

Modules: :mod:`.records` (a run as the inspector sees it), :mod:`.sources` (reading stores and logs),
:mod:`.views` (cycles, plans and stages as the pages show them), :mod:`.flowgraph` (a flow's DAG laid out),
:mod:`.diff` (two runs side by side), :mod:`.prompts` (a call's prompt from the run's cassette), :mod:`.app`
(routes to responses), :mod:`.gate` (the session's secret, on every request), :mod:`.server` (HTTP),
:mod:`.local` (what every local server shares: its secret, the browser, SIGTERM) and :mod:`.command` (the click
command). Only the command is imported when ``aeon`` starts.
"""
