"""The demo site with a logging handler bound to stdout, as some sites configure it: the
stdio command must keep such output off the protocol stream."""

from project.settings import *  # noqa: F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stdout": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout"}},
    "root": {"handlers": ["stdout"], "level": "WARNING"},
}
