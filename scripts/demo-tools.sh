# shellcheck shell=bash
# demo-tools.sh is sourced by scripts/run.sh (make run) and
# scripts/compose-test.sh (make compose-test), so both drive the same demo
# session (examples/session): DEMO_TOOLS are the tools it enables, in the
# order of its steps. web_search is not among them: it reaches a provider
# on the internet, so make run adds it only when a key is set, and
# make compose-test, whose containers reach nothing beyond this machine,
# never does. A new service's tools join the demo here.
DEMO_TOOLS=echo,lookup_order,inspect_session,sandbox_exec,sandbox_start,sandbox_status,sandbox_write_file,sandbox_read_file,storage_put,storage_get,storage_list,storage_delete,web_fetch,browser_open,browser_act,browser_screenshot,browser_pages
