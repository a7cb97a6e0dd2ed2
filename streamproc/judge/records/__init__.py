"""Level 2a: claims checked against structured records and their typed values.

Claims about this case (ids, amounts, order states, actions reported as done) are
checked by :mod:`.case_check`, one rule family per module: :mod:`.execution`,
:mod:`.identifiers`, :mod:`.amounts`, :mod:`.states`, over the shared record view of
:mod:`.common`, each yielding a :mod:`.findings` finding. :mod:`.confirmation` tells
token confidence which values a record carries. Typed values (hours, yes/no attributes,
ratings, prices, measures) are compared by :mod:`.structured`.
"""
