package search

// description is web_search's; its schemas are inferred from Args and
// Output.
const description = `Search the web. Returns up to count results (title, url, snippet, published date, source site), deduplicated by URL, and with include_answer a short generated answer when the provider offers one (Tavily). Use offset to page (pages of count results), freshness to limit by age (pd = past day, pw, pm, py, or YYYY-MM-DDtoYYYY-MM-DD), include_domains / exclude_domains to restrict sites, topic news or finance for those searches.`
