/* CLOCK_MONOTONIC readings: the READY line's mono_ns and the agent's retry
 * timers. */
#pragma once

#include <stdint.h>

uint64_t monotonic_ns(void);
uint64_t monotonic_ms(void);
