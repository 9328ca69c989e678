"""Ansible's community.libvirt modules (Debian's ansible package) with
uri vsnap:///system, driven as an inventory task would: a playbook run by
ansible-playbook on localhost. The virt module lists, defines, starts, stops
and undefines a domain that runs the test guest; virt_pool lists the pools
of the host's storage driver (a libvirtd of the test's own,
tests/clients/hostdrivers.py) with their facts, and without a storage driver
fails cleanly, naming the API vsnap cannot serve."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostdrivers import HostDrivers, daemon_with_storage_uri  # noqa: E402
from vsnapd import domain_xml, needs_guest  # noqa: E402

COLLECTION = "/usr/lib/python3/dist-packages/ansible_collections/community/libvirt"

DOMAIN_TASKS = """
    - name: define
      community.libvirt.virt: {{command: define, xml: "{{{{ lookup('file', domain_xml) }}}}", uri: "{{{{ uri }}}}"}}
    - name: list after define
      community.libvirt.virt: {{command: list_vms, uri: "{{{{ uri }}}}"}}
    - name: start
      community.libvirt.virt: {{name: {name}, state: running, uri: "{{{{ uri }}}}"}}
    - name: status running
      community.libvirt.virt: {{name: {name}, command: status, uri: "{{{{ uri }}}}"}}
    - name: running only
      community.libvirt.virt: {{command: list_vms, state: running, uri: "{{{{ uri }}}}"}}
    - name: stop
      community.libvirt.virt: {{name: {name}, state: destroyed, uri: "{{{{ uri }}}}"}}
    - name: status stopped
      community.libvirt.virt: {{name: {name}, command: status, uri: "{{{{ uri }}}}"}}
    - name: undefine
      community.libvirt.virt: {{name: {name}, command: undefine, uri: "{{{{ uri }}}}"}}
    - name: list after undefine
      community.libvirt.virt: {{command: list_vms, uri: "{{{{ uri }}}}"}}
"""

POOL_TASKS = """
    - name: pools
      community.libvirt.virt_pool: {command: list_pools, uri: "{{ uri }}"}
      ignore_errors: true
    - name: pool facts
      community.libvirt.virt_pool: {command: facts, uri: "{{ uri }}"}
      ignore_errors: true
"""


def playbook(tasks):
    return "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n" + tasks


def run_playbook(workdir, tasks, variables):
    """{task name: result} of one ansible-playbook run (the json callback)."""
    path = os.path.join(workdir, "play.yml")
    with open(path, "w") as f:
        f.write(playbook(tasks))
    env = dict(os.environ, HOME=workdir, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOCAL_TEMP=workdir,
               ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3", ANSIBLE_NOCOLOR="1")
    argv = ["ansible-playbook", "-i", "localhost,", path, "-e", json.dumps(variables)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env, cwd=workdir)
    try:
        report = json.loads(res.stdout)
    except ValueError:
        raise AssertionError(f"ansible-playbook printed no report ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return {t["task"]["name"]: t["hosts"]["localhost"] for t in report["plays"][0]["tasks"]}


def have_ansible():
    return os.access("/usr/bin/ansible-playbook", os.X_OK) and os.path.isdir(COLLECTION)


@unittest.skipUnless(have_ansible(), "ansible (Debian's package, with community.libvirt) is not installed")
class AnsibleTest(unittest.TestCase):
    def check_domain_tasks(self, results, name):
        for task, result in results.items():
            if task not in ("pools", "pool facts"):
                self.assertFalse(result.get("failed"), f"{task}: {result}")
        self.assertEqual(results["define"].get("created"), name)
        self.assertIn(name, results["list after define"]["list_vms"])
        self.assertTrue(results["start"]["changed"])
        self.assertEqual(results["status running"]["status"], "running")
        self.assertEqual(results["running only"]["list_vms"], [name])
        self.assertTrue(results["stop"]["changed"])
        self.assertEqual(results["status stopped"]["status"], "shutdown")
        self.assertNotIn(name, results["list after undefine"]["list_vms"])

    @needs_guest
    def test_domain_and_pools_with_storage_driver(self):
        if os.geteuid() != 0:
            self.skipTest("network and mount namespaces need root")
        env = HostDrivers()
        try:
            target = os.path.join(env.daemon.dir, "images")
            os.makedirs(target)
            with open(os.path.join(target, "a.raw"), "wb") as f:
                f.truncate(1 << 20)
            host = env.storage()
            try:
                pool = host.storagePoolDefineXML(f"<pool type='dir'><name>vsnimages</name><target><path>{target}"
                                                 "</path></target></pool>", 0)
                pool.create(0)
            finally:
                host.close()
            work = os.path.join(env.daemon.dir, "ansible")
            os.makedirs(work)
            xml = os.path.join(work, "dom.xml")
            with open(xml, "w") as f:
                f.write(domain_xml("ans1"))
            results = run_playbook(work, DOMAIN_TASKS.format(name="ans1") + POOL_TASKS,
                                   {"uri": env.daemon.uri, "domain_xml": xml})
            self.check_domain_tasks(results, "ans1")
            self.assertEqual(results["pools"]["list_pools"], ["vsnimages"], results["pools"])
            facts = results["pool facts"]["ansible_facts"]["ansible_libvirt_pools"]["vsnimages"]
            self.assertEqual((facts["state"], facts["status"], facts["path"], facts["volumes"], facts["type"]),
                             ("active", "running", target, ["a.raw"], "dir"))
        finally:
            env.close()

    def test_pools_without_storage_driver(self):
        """virt_pool fails cleanly, saying which call vsnap cannot serve
        without a storage driver; no traceback."""
        daemon = daemon_with_storage_uri("storage:///system?socket=/nonexistent/libvirt-sock")
        try:
            work = os.path.join(daemon.dir, "ansible")
            os.makedirs(work)
            results = run_playbook(work, POOL_TASKS, {"uri": daemon.uri})
            for task in ("pools", "pool facts"):
                self.assertTrue(results[task].get("failed"), results[task])
                # python3-libvirt's listStoragePools asks for the count first.
                self.assertIn("virConnectNumOfStoragePools is not supported by vsnap without the host's storage "
                              "driver", results[task]["msg"])
                self.assertNotIn("exception", results[task])
        finally:
            daemon.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
