package search

const description = `Search the web. Returns up to count results (title, url, snippet, published date, source site), deduplicated by URL, and with include_answer a short generated answer when the provider offers one (Tavily). Use offset to page (pages of count results), freshness to limit by age (pd = past day, pw, pm, py, or YYYY-MM-DDtoYYYY-MM-DD), include_domains / exclude_domains to restrict sites, topic news or finance for those searches.`

const inputSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 400, "description": "What to search for."},
    "count": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Results to return; default 10."},
    "offset": {"type": "integer", "minimum": 0, "maximum": 9, "description": "Page of count results to start at; default 0."},
    "freshness": {"type": "string", "pattern": "^(pd|pw|pm|py|\\d{4}-\\d{2}-\\d{2}to\\d{4}-\\d{2}-\\d{2})$", "description": "pd, pw, pm, py (past day/week/month/year) or a date range YYYY-MM-DDtoYYYY-MM-DD."},
    "country": {"type": "string", "pattern": "^[A-Za-z]{2}$", "description": "Two-letter country code to favour, e.g. US."},
    "safe_search": {"type": "string", "enum": ["off", "moderate", "strict"]},
    "include_domains": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 253}, "description": "Only results from these domains (and their subdomains)."},
    "exclude_domains": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 253}, "description": "No results from these domains."},
    "topic": {"type": "string", "enum": ["general", "news", "finance"]},
    "include_answer": {"type": "boolean", "description": "Also return a short generated answer (Tavily only)."},
    "provider": {"type": "string", "enum": ["brave", "tavily"], "description": "Use this provider instead of the service's default, when configured."}
  },
  "required": ["query"],
  "additionalProperties": false
}`

const outputSchema = `{
  "type": "object",
  "properties": {
    "provider": {"type": "string"},
    "query": {"type": "string"},
    "results": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "title": {"type": "string"},
          "url": {"type": "string"},
          "snippet": {"type": "string"},
          "published": {"type": "string"},
          "source": {"type": "string"}
        },
        "required": ["title", "url", "snippet"]
      }
    },
    "answer": {"type": "string"},
    "notes": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["provider", "query", "results"]
}`
