"""``aeon init DIR --template local|service|ray``: lay out a project a team can deploy (spec 004 §10.13).

:mod:`.command` is the click command (only click is imported with ``aeon``); :mod:`.project` writes the project
from the Jinja templates in ``templates/`` and pins the installed packages in ``requirements.txt``.
"""
