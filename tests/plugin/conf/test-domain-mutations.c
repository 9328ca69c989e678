/* Robustness of the domain parser: thousands of mutated copies of the
 * examples (deterministic seeds, so a failure reproduces). Each must either
 * be refused with a libvirt error code and a message, or be accepted and then
 * format to XML (inactive and live) that parses back to the same formatting. Never a crash: run
 * under ASan/valgrind to also catch memory errors. */
#include <string.h>

#include "conf-test.h"
#include "conf/domain-conf.h"

#define MUTATIONS_PER_EXAMPLE 600

static const char *schema_dir;
static const char *examples_dir;

static const char *const fragments[] = {
    "<", ">", "/", "'", "\"", "&", "&amp;", "=", "0", "4294967295", "18446744073709551616", "-1", " ",
    "<disk/>", "<graphics type='vnc'/>", "unit='GiB'", "unit='b'", "<vcpu>64</vcpu>", "<serial type='pty'/>",
    "<console type='pty'/>", "<vsock><cid auto='no' address='3'/></vsock>", "xmlns:a='urn:a'",
    "<a:x xmlns:a='urn:a'/>", "<!--c-->", "<![CDATA[x]]>", "\xff\xfe", "\n", "<?pi x?>", "&#0;", "&#x41;",
    "<readonly/>", "<shareable/>", "type='block'", "type='qcow2'", "<target dev='vda'/>", "<serial>s</serial>",
    "<backingStore/>", "<backingStore type='file'><format type='raw'/><source file='/l'/></backingStore>",
    "<disk type='file'><source file='/d.img'/><target dev='vdz'/></disk>",
};

static void mutate(GString *xml, GRand *rand)
{
    if (xml->len == 0) {
        g_string_append(xml, fragments[g_rand_int_range(rand, 0, G_N_ELEMENTS(fragments))]);
        return;
    }
    gsize pos = g_rand_int_range(rand, 0, (gint32)xml->len);
    gsize wanted = (gsize)g_rand_int_range(rand, 1, 24); /* not inside MIN(): evaluated twice */
    gsize span = MIN(wanted, xml->len - pos);
    switch (g_rand_int_range(rand, 0, 4)) {
    case 0:
        g_string_erase(xml, pos, span);
        break;
    case 1:
        g_string_insert(xml, pos, fragments[g_rand_int_range(rand, 0, G_N_ELEMENTS(fragments))]);
        break;
    case 2: {
        g_autofree char *copy = g_strndup(xml->str + pos, span);
        g_string_insert(xml, g_rand_int_range(rand, 0, (gint32)xml->len), copy);
        break;
    }
    default:
        xml->str[pos] = (char)g_rand_int_range(rand, 1, 256);
        break;
    }
}

static bool is_expected_code(int code)
{
    return code == VIR_ERR_XML_ERROR || code == VIR_ERR_XML_DETAIL || code == VIR_ERR_CONFIG_UNSUPPORTED ||
           code == VIR_ERR_INVALID_ARG;
}

/* Definitions are read with domain_def_parse_string, live XML (the
 * daemon's status) with domain_def_parse_live_string. */
typedef struct domain_def *(*parse_fn)(const char *xml, const char *schema_dir, GError **error);

struct example {
    const char *name;
    parse_fn parse;
};

static void check_one(const char *xml, parse_fn parse, guint32 seed, int round)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = parse(xml, schema_dir, &error);
    if (!def) {
        if (!error || error->domain != VSNAP_VIR_ERROR || !is_expected_code(error->code) || !error->message[0])
            g_error("seed %u round %d: bad refusal (%d: %s) of:\n%s", seed, round, error ? error->code : -1,
                    error ? error->message : "no error", xml);
        return;
    }
    g_autofree char *formatted = domain_def_format(def, false, -1);
    g_autoptr(domain_def) again = domain_def_parse_string(formatted, schema_dir, &error);
    if (!again)
        g_error("seed %u round %d: formatted XML refused (%s):\n%s", seed, round, error->message, formatted);
    g_autofree char *twice = domain_def_format(again, false, -1);
    g_assert_cmpstr(formatted, ==, twice);
    /* Live XML too: the daemon keeps it as status and reads it back. */
    g_autofree char *live = domain_def_format(def, true, 3);
    g_autoptr(domain_def) live_again = domain_def_parse_live_string(live, schema_dir, &error);
    if (!live_again)
        g_error("seed %u round %d: live XML refused (%s):\n%s", seed, round, error->message, live);
    g_autofree char *live_twice = domain_def_format(live_again, true, 3);
    g_assert_cmpstr(live, ==, live_twice);
}

static void test_mutations(gconstpointer data)
{
    const struct example *example = data;
    const char *name = example->name;
    g_autofree char *original = conf_test_read(examples_dir, name, NULL);
    guint32 seed = g_str_hash(name);
    g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
    int accepted = 0;
    for (int round = 0; round < MUTATIONS_PER_EXAMPLE; round++) {
        g_autoptr(GString) xml = g_string_new(original);
        int edits = g_rand_int_range(rand, 1, 4);
        for (int i = 0; i < edits; i++)
            mutate(xml, rand);
        check_one(xml->str, example->parse, seed, round);
        g_autoptr(GError) error = NULL;
        g_autoptr(domain_def) def = example->parse(xml->str, schema_dir, &error);
        accepted += def != NULL;
    }
    /* Both paths must be exercised, or the mutations prove nothing. */
    g_test_message("%s: %d of %d mutations accepted", name, accepted, MUTATIONS_PER_EXAMPLE);
    g_assert_cmpint(accepted, >, 0);
    g_assert_cmpint(accepted, <, MUTATIONS_PER_EXAMPLE);
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    static const struct example examples[] = {
        {"minimal.xml", domain_def_parse_string},
        {"microvm.xml", domain_def_parse_string},
        {"virt-install.xml", domain_def_parse_string},
        {"serial-file.xml", domain_def_parse_string},
        {"disks.xml", domain_def_parse_string},
        {"live/disk-chain.xml", domain_def_parse_live_string},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(examples); i++) {
        g_autofree char *test_path = g_strdup_printf("/conf/domain/mutations/%s", examples[i].name);
        g_test_add_data_func(test_path, &examples[i], test_mutations);
    }
    return g_test_run();
}
