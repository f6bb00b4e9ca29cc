"""The stepscope contract: models and pure functions every component shares. No I/O lives here."""

from stepscope_contract.constants import API_VERSION, GROUP, KIND, PLURAL, VERSION

__all__ = ["API_VERSION", "GROUP", "KIND", "PLURAL", "VERSION"]
