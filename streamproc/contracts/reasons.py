"""A reason of a claim's verdict: a code programs branch on, and a detail for people.

On the wire a reason stays the one string it has always been (``"CODE: detail"``, or
``"CODE"``), so published verdicts, their JSON Schema and the audit chain's hashed records
do not change. In the process it is a :class:`Reason`: the judge makes each one from its
code and detail, and whoever acts on a reason reads :attr:`Reason.code`, never the text.
The text is read back into code and detail in one place only, :meth:`Reason.from_text`,
when a verdict is read from a topic, a file or the audit store.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["Reason"]

_CODE: Final = r"[A-Z][A-Z0-9_]*"
_TEXT: Final = re.compile(rf"(?P<code>{_CODE})(?:: (?P<detail>.*))?", re.DOTALL)


class Reason(str):
    """A reason's code and detail, that is also its wire text (a ``str``, so it prints,
    joins, compares and serialises as the text it stands for).

    ``code`` is empty only for a text of no known form read from outside (a hand-edited
    verdict), so that such a text is still kept exactly as written.
    """

    code: str
    detail: str | None

    def __new__(cls, code: str, detail: str | None = None) -> Reason:
        if not re.fullmatch(_CODE, code):
            raise ValueError(f"not a reason code: {code!r}")
        return cls._made(code if detail is None else f"{code}: {detail}", code, detail)

    @classmethod
    def _made(cls, text: str, code: str, detail: str | None) -> Reason:
        made = str.__new__(cls, text)
        made.code = code
        made.detail = detail
        return made

    @classmethod
    def from_text(cls, text: str) -> Reason:
        """The reason a wire text stands for; the text itself is kept exactly."""
        if isinstance(text, Reason):
            return text
        found = _TEXT.fullmatch(text)
        if found is None:
            return cls._made(text, "", text)
        return cls._made(text, found["code"], found["detail"])

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (to and from the judge's own process) as its text, read back exactly."""
        return (Reason.from_text, (str(self),))

    def __repr__(self) -> str:
        return f"Reason({self.code!r}, {self.detail!r})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls.from_text,
            core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(
                str.__str__, return_schema=core_schema.str_schema()
            ),
        )
