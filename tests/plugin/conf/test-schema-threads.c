/* Many threads validating domain and snapshot XML at once, as clients of
 * the daemon defining domains at the same moment do.
 *
 * libxml2 sets up its RelaxNG type library the first time a schema is
 * parsed, without a lock: two first parses at once lose the registration of
 * XML Schema's datatypes ("Error type 'int' is not exported by type library").
 * That happens once per process, so each round is a new process (a fork
 * made before libxml2 was touched) whose threads all start together; on the
 * code that parsed the schema for every validation, 6 or 7 rounds in 400
 * failed so. Then, in one process, threads validate many times over, valid
 * and invalid documents mixed: a schema shared between validations must
 * give each its own answer. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf-test.h"
#include "conf/domain-conf.h"
#include "conf/snapshot-conf.h"
#include "conf/xml-util.h"

#define ROUNDS 400
#define THREADS 16
#define VALIDATIONS 40

static const char *schema_dir;
static const char *examples_dir;
static char *domain_xml;
static char *snapshot_xml;
static char *invalid_xml;
static GMutex start_lock;
static GCond start_cond;
static int waiting;

/* Holds every thread until all of them are ready, so that their first
 * validations overlap. */
static void wait_for_all(void)
{
    g_mutex_lock(&start_lock);
    if (++waiting == THREADS)
        g_cond_broadcast(&start_cond);
    while (waiting < THREADS)
        g_cond_wait(&start_cond, &start_lock);
    g_mutex_unlock(&start_lock);
}

/* NULL when the i-th validation gave the answer it must, else why not. */
static char *validate_once(int i)
{
    g_autoptr(GError) error = NULL;
    switch (i % 3) {
    case 0: {
        g_autoptr(domain_def) def = domain_def_parse_string(domain_xml, schema_dir, &error);
        return def ? NULL : g_strdup_printf("domain refused: %s", error->message);
    }
    case 1: {
        g_autoptr(snapshot_def) def = snapshot_def_parse_string(snapshot_xml, schema_dir, &error);
        return def ? NULL : g_strdup_printf("snapshot refused: %s", error->message);
    }
    default: {
        /* Straight to the schema: the parser's own walk would refuse it
         * first. */
        g_autoptr(xmlDoc) doc = conf_xml_read(invalid_xml, "domain", &error);
        if (!doc)
            return g_strdup_printf("unreadable: %s", error->message);
        if (conf_xml_validate(doc, schema_dir, "domain.rng", &error))
            return g_strdup("a memory size of 'lots' was accepted");
        if (!strstr(error->message, "does not match schema domain.rng"))
            return g_strdup_printf("wrong refusal: %s", error->message);
        return NULL;
    }
    }
}

static int validations_per_thread;

static gpointer validate_thread(gpointer data)
{
    int first = GPOINTER_TO_INT(data);
    wait_for_all();
    for (int i = 0; i < validations_per_thread; i++) {
        char *why = validate_once(first + i);
        if (why)
            return why;
    }
    return NULL;
}

/* 0 when every validation of THREADS threads, n each, all started at
 * once, gave the right answer. */
static int run_threads(int n)
{
    GThread *threads[THREADS];
    int failed = 0;
    waiting = 0;
    validations_per_thread = n;
    for (int t = 0; t < THREADS; t++)
        threads[t] = g_thread_new("validate", validate_thread, GINT_TO_POINTER(t));
    for (int t = 0; t < THREADS; t++) {
        g_autofree char *why = g_thread_join(threads[t]);
        if (why) {
            g_printerr("thread %d: %s\n", t, why);
            failed = 1;
        }
    }
    return failed;
}

static char *read_invalid_domain(void)
{
    /* The minimal example with a memory size that is not a number: the
     * schema's datatype check (XML Schema's unsignedLong) refuses it. */
    g_autofree char *minimal = conf_test_read(examples_dir, "minimal.xml", NULL);
    g_autoptr(GRegex) size = g_regex_new(">256<", 0, 0, NULL);
    return g_regex_replace_literal(size, minimal, -1, 0, ">lots<", 0, NULL);
}

static void test_first_validations_at_once(void)
{
    int failed_rounds = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pid_t pid = fork();
        g_assert_cmpint(pid, >=, 0);
        if (pid == 0)
            _exit(run_threads(1));
        int status = 0;
        g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
        g_assert_true(WIFEXITED(status));
        failed_rounds += WEXITSTATUS(status) != 0;
    }
    if (failed_rounds) {
        g_test_message("%d of %d rounds of %d threads validating at once failed", failed_rounds,
                       ROUNDS, THREADS);
        g_test_fail();
    }
}

static void test_many_validations_at_once(void)
{
    g_assert_cmpint(run_threads(VALIDATIONS), ==, 0);
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    domain_xml = conf_test_read(examples_dir, "disks.xml", NULL);
    snapshot_xml = conf_test_read(examples_dir, "snapshots", "redefine.xml", NULL);
    invalid_xml = read_invalid_domain();
    g_test_add_func("/conf/schema-threads/first-validations-at-once",
                    test_first_validations_at_once);
    /* After the first: this one touches libxml2 in the test's own process. */
    g_test_add_func("/conf/schema-threads/many-validations-at-once", test_many_validations_at_once);
    return g_test_run();
}
