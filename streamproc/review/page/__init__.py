"""The review page (``streamproc review serve``): reviewers label sampled answers.

- :mod:`.auth`: reviewer tokens, kept hashed in a TOML file, each naming the tenants its
  reviewer may see.
- :mod:`.queue_store`: the page's queue in SQL - review items read from the queue topic,
  and who labelled what.
- :mod:`.intake`: the consumer that fills the queue from the queue topic.
- :mod:`.view`: what one item looks like on the page (highlighted evidence, claims).
- :mod:`.server`: the aiohttp application, server-rendered with Jinja2.
- :mod:`.publisher`: the Kafka producer that publishes the labels.
"""
