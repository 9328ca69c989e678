/* Duties of PID 1, when the agent is the initramfs's /init: mount the kernel's
 * file systems and reap orphans. */
#pragma once

void pid1_mount_filesystems(void);
void pid1_reap_children(void);
