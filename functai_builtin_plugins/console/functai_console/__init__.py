"""functai console: the approvals inbox, the call browser and the conversation tree, in a browser.

``functai console STORE [--log CALLS]`` serves it (this distribution adds the command through the
``functai.commands`` entry point). `make_app` gives the same console as an ASGI app, to mount in
another server. Public functai API only.
"""

from .app import Console, make_app

__version__ = "0.1.0"

__all__ = ["Console", "make_app"]
