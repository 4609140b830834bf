"""Errors of the local development stack. Each carries a message a person can act on."""


class DevStackError(RuntimeError):
    """Something in the local stack could not be set up or started."""


class BrokerStartError(DevStackError):
    """A broker could not be started; the message ends with the tail of its log."""
