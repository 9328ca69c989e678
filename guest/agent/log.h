/* vsnap-agent's diagnostics: one line on stderr, prefixed "vsnap-agent: "
 * (the console when the agent is PID 1). */
#pragma once

void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
