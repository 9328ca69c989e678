/* The snapshot directory (common/snapshot/directory.h) on its own, with only
 * the library linked: the one parser refuses every wrong version, id and
 * member; the one writer's rewrite of the parent keeps the rest of state.json;
 * config.json and state.json are bound by their checksums; chains check
 * records against layers; seals; writing and committing (0700/0600). */
#include "snapshot/directory.h"
#include "snapshot/layer-write.h"
#include "json/vjson.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGES 64u
#define CONFIG_TEXT "{\n  \"cpus\" : {\"boot_vcpus\" : 1},\n  \"memory\" : {\"size\" : 262144}\n}\n"
#define RAM ((uint64_t)PAGES * SNAP_PAGE_SIZE)
#define DIGEST_OF_NOTHING "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Three snapshots: base (full: pages 0-7 seed 1), mid (diff: pages 2-3 seed
 * 2), top (diff: page 3 seed 3, page 5 zero). */
struct fixture {
    char *root;
    char *base, *mid, *top;
    snap_id ids[3];
};

static void fill_page(uint8_t *page, uint64_t p, unsigned seed)
{
    for (unsigned i = 0; i < SNAP_PAGE_SIZE; i++)
        page[i] = (uint8_t)(p * 31 + seed * 7 + i % 251 + 1);
}

/* What the RAM holds at top: the expected byte pattern's seed, 0 for zero. */
static unsigned seed_at_top(uint64_t p, bool with_mid)
{
    if (p == 5)
        return 0;
    if (p == 3)
        return 3;
    if (p == 2)
        return with_mid ? 2 : 1;
    return p < 8 ? 1 : 0;
}

static void write_layer(const char *dir, const snap_id *id, const snap_id *parent, uint64_t first, uint64_t n,
                        unsigned seed, bool zero_page_5)
{
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_LAYER_FILE, NULL);
    g_autoptr(GError) error = NULL;
    struct snap_layer_writer *w = snap_layer_writer_new(path, RAM, id, parent, &error);
    g_assert_no_error(error);
    g_autofree uint8_t *data = g_malloc(n * SNAP_PAGE_SIZE);
    for (uint64_t i = 0; i < n; i++)
        fill_page(data + i * SNAP_PAGE_SIZE, first + i, seed);
    g_assert_true(snap_layer_writer_add(w, first, n, data, &error));
    if (zero_page_5)
        g_assert_true(snap_layer_writer_add(w, 5, 1, NULL, &error));
    g_assert_true(snap_layer_writer_commit(w, &error));
}

/* state.json as the shim writes it: the record, then members of its own. */
static void write_state(const char *dir, const struct snap_memory_record *memory)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    snap_state_add_record(b, memory);
    vjson_object_begin(b, "kvm");
    vjson_str(b, "clock", "0x123456789abcdef0");
    vjson_object_end(b);
    vjson_array_begin(b, "vcpus");
    vjson_object_begin(b, NULL);
    vjson_str(b, "regs", "AAECAwQFBgc=");
    vjson_object_begin(b, "msrs");
    vjson_str(b, "0x10", "0x1");
    vjson_object_end(b);
    vjson_object_end(b);
    vjson_array_end(b);
    vjson_object_begin(b, "devices");
    vjson_object_begin(b, "serial");
    vjson_int(b, "ier", 3);
    vjson_bool(b, "loopback", FALSE);
    vjson_object_end(b);
    vjson_object_end(b);
    vjson_object_end(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_dir_write_state(dir, root, CONFIG_TEXT, &error));
    g_assert_no_error(error);
}

static char *make_snapshot(struct fixture *f, const char *name, unsigned i, int parent, uint64_t first,
                           uint64_t n, bool zero_page_5)
{
    char *dir = g_build_filename(f->root, name, NULL);
    g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
    write_layer(dir, &f->ids[i], parent >= 0 ? &f->ids[parent] : NULL, first, n, i + 1, zero_page_5);
    const char *parent_dir = parent == 0 ? f->base : parent == 1 ? f->mid : NULL;
    g_autofree char *url = parent_dir ? snap_dir_url(parent_dir) : NULL;
    struct snap_memory_record memory = { .layer = SNAP_DIR_LAYER_FILE, .diff = parent >= 0, .id = f->ids[i],
                                         .parent_url = url, .ram_size = RAM };
    if (parent >= 0)
        memory.parent_id = f->ids[parent];
    write_state(dir, &memory);
    return dir;
}

static void fixture_init(struct fixture *f)
{
    g_autoptr(GError) error = NULL;
    f->root = g_dir_make_tmp("vsnap-dir-XXXXXX", &error);
    g_assert_no_error(error);
    for (unsigned i = 0; i < 3; i++)
        snap_id_random(&f->ids[i]);
    f->base = make_snapshot(f, "base", 0, -1, 0, 8, false);
    f->mid = make_snapshot(f, "mid", 1, 0, 2, 2, false);
    f->top = make_snapshot(f, "top", 2, 1, 3, 1, true);
}

static void fixture_clear(struct fixture *f)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_dir_remove(f->root, &error));
    g_assert_false(g_file_test(f->root, G_FILE_TEST_EXISTS));
    g_free(f->root);
    g_free(f->base);
    g_free(f->mid);
    g_free(f->top);
}

static char *read_text(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

static JsonNode *read_json(const char *dir)
{
    g_autofree char *text = read_text(dir, SNAP_DIR_STATE_FILE);
    g_autoptr(GError) error = NULL;
    JsonNode *root = json_from_string(text, &error);
    g_assert_no_error(error);
    return root;
}

/* state.json's checksum as README.md defines it, computed here on its own:
 * the SHA-256 of the file with the digest's 64 digits (the last member, so
 * their last occurrence) as zeros. */
static char *sealed_text(JsonNode *root)
{
    static const char zeros[] = "0000000000000000000000000000000000000000000000000000000000000000";
    JsonObject *obj = json_node_get_object(root);
    json_object_remove_member(obj, "state_sha256");
    json_object_set_string_member(obj, "state_sha256", zeros);
    char *text = json_to_string(root, TRUE);
    char *digits = g_strrstr(text, zeros);
    g_assert_nonnull(digits);
    g_autofree char *sum = g_compute_checksum_for_string(G_CHECKSUM_SHA256, text, -1);
    memcpy(digits, sum, 64);
    return text;
}

/* Write root as state.json with a correct checksum (an edit the checksum
 * does not catch, to reach the record's own checks). */
static void write_json(const char *dir, JsonNode *root)
{
    g_autofree char *text = sealed_text(root);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_dir_write_file(dir, SNAP_DIR_STATE_FILE, text, &error));
}

static JsonObject *memory_of(JsonNode *root)
{
    return json_object_get_object_member(json_node_get_object(root), "memory");
}

/* Every member of state.json but "memory" is the same in a and b. */
static void assert_same_but_memory(JsonNode *a, JsonNode *b)
{
    JsonObject *oa = json_node_get_object(a), *ob = json_node_get_object(b);
    g_assert_cmpuint(json_object_get_size(oa), ==, json_object_get_size(ob));
    g_autoptr(GList) names = json_object_get_members(oa);
    for (GList *l = names; l; l = l->next) {
        if (!strcmp(l->data, "memory") || !strcmp(l->data, "state_sha256"))
            continue;
        JsonNode *na = json_object_get_member(oa, l->data), *nb = json_object_get_member(ob, l->data);
        g_assert_nonnull(nb);
        g_assert_true(json_node_equal(na, nb));
        g_autofree char *ta = json_to_string(na, TRUE), *tb = json_to_string(nb, TRUE);
        g_assert_cmpstr(ta, ==, tb);
    }
}

static void assert_chain_holds_top(const char *top, unsigned nlayers, bool with_mid)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(top, &error);
    g_assert_no_error(error);
    g_autoptr(snap_chain) chain = snap_dir_open_chain(d, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(chain->nlayers, ==, nlayers);
    uint8_t want[SNAP_PAGE_SIZE];
    for (uint64_t p = 0; p < PAGES; p++) {
        unsigned layer = 0;
        uint64_t dp = 0;
        enum snap_page_kind kind = snap_chain_find(chain, p, &layer, &dp);
        unsigned seed = seed_at_top(p, with_mid);
        if (!seed) {
            g_assert_cmpint(kind, ==, SNAP_PAGE_KIND_ZERO);
            continue;
        }
        g_assert_cmpint(kind, ==, SNAP_PAGE_KIND_DATA);
        g_assert_true(snap_layer_verify_data(chain->layers[layer], dp, 1, &error));
        fill_page(want, p, seed);
        g_assert_cmpmem(snap_layer_data_page(chain->layers[layer], dp), SNAP_PAGE_SIZE, want, SNAP_PAGE_SIZE);
    }
}

static void test_read(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) base = snap_dir_read(f.base, &error);
    g_assert_no_error(error);
    g_assert_false(base->memory.diff);
    g_assert_true(snap_id_equal(&base->memory.id, &f.ids[0]));
    g_assert_null(base->parent_path);
    g_assert_cmpuint(base->memory.ram_size, ==, RAM);
    g_autofree char *layer = g_build_filename(f.base, SNAP_DIR_LAYER_FILE, NULL);
    g_assert_cmpstr(base->layer_path, ==, layer);
    g_autoptr(snap_dir) top = snap_dir_read(f.top, &error);
    g_assert_no_error(error);
    g_assert_true(top->memory.diff);
    g_assert_true(snap_id_equal(&top->memory.parent_id, &f.ids[1]));
    g_assert_cmpstr(top->parent_path, ==, f.mid);
    g_assert_true(json_object_has_member(json_node_get_object(top->state), "vcpus"));
    assert_chain_holds_top(f.top, 3, true);
    fixture_clear(&f);
}

/* Set member `name` of the memory record (or the root when !in_memory) to
 * the JSON `value`, or remove it (value NULL). */
static void edit_state(const char *dir, bool in_memory, const char *name, const char *value)
{
    g_autoptr(JsonNode) root = read_json(dir);
    JsonObject *obj = in_memory ? memory_of(root) : json_node_get_object(root);
    if (value)
        json_object_set_member(obj, name, json_from_string(value, NULL));
    else
        json_object_remove_member(obj, name);
    write_json(dir, root);
}

static void assert_refused(const char *dir, int code, const char *needle)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &error);
    g_assert_null(d);
    g_assert_error(error, SNAP_ERROR, code);
    g_assert_nonnull(strstr(error->message, dir));
    if (!strstr(error->message, needle))
        g_error("\"%s\" does not say \"%s\"", error->message, needle);
}

static void test_version_refused(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autofree char *good = read_text(f.top, SNAP_DIR_STATE_FILE);
    const char *versions[] = { "1", "3", "0", "\"2\"", "2.0", "null", NULL /* none at all */ };
    for (unsigned i = 0; i < G_N_ELEMENTS(versions); i++) {
        edit_state(f.top, false, "vsnap_state_version", versions[i]);
        assert_refused(f.top, SNAP_ERROR_FORMAT, "format version");
        /* The daemon's rewrite refuses it too, and leaves the file alone. */
        g_autofree char *before = read_text(f.top, SNAP_DIR_STATE_FILE);
        g_autoptr(GError) error = NULL;
        g_assert_false(snap_dir_set_parent(f.top, f.mid, &error));
        g_assert_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT);
        g_autofree char *after = read_text(f.top, SNAP_DIR_STATE_FILE);
        g_assert_cmpstr(before, ==, after);
    }
    g_autofree char *path = g_build_filename(f.top, SNAP_DIR_STATE_FILE, NULL);
    g_assert_true(g_file_set_contents(path, good, -1, NULL));
    assert_chain_holds_top(f.top, 3, true);
    fixture_clear(&f);
}

static void test_bad_records_refused(void)
{
    struct fixture f;
    fixture_init(&f);
    char own[37];
    snap_id_to_string(&f.ids[2], own);
    g_autofree char *own_json = g_strdup_printf("\"%s\"", own);
    const struct {
        const char *dir;
        const char *member, *value;
        const char *needle;
    } cases[] = {
        { f.top, "id", "\"not-a-uuid\"", "memory.id" },
        { f.top, "id", "\"00000000-0000-0000-0000-000000000000\"", "memory.id" },
        { f.top, "id", "7", "memory.id" },
        { f.top, "id", NULL, "memory.id" },
        { f.top, "parent_id", "\"0123456789abcdef\"", "memory.parent_id" },
        { f.top, "parent_id", NULL, "memory.parent_id" },
        { f.top, "parent_id", own_json, "own id" },
        { f.top, "parent_url", NULL, "memory.parent_url" },
        { f.top, "parent_url", "\"http://host/mid\"", "memory.parent_url" },
        { f.top, "parent_url", "\"mid\"", "memory.parent_url" },
        { f.top, "kind", "\"delta\"", "memory.kind" },
        { f.top, "layer", "\"../base/memory-ranges\"", "memory.layer" },
        { f.top, "layer", "\"\"", "memory.layer" },
        { f.top, "ram_size", "4095", "memory.ram_size" },
        { f.top, "ram_size", "\"262144\"", "memory.ram_size" },
        { f.top, "ram_size", NULL, "memory.ram_size" },
        { f.top, "disk", "{}", "memory.disk" },
        { f.base, "parent_id", own_json, "full snapshot" },
        { f.base, "parent_url", "\"file:///x\"", "full snapshot" },
    };
    const struct {
        const char *value, *needle;
    } configs[] = {
        { NULL, "\"config\" is missing" },
        { "[]", "\"config\" is missing" },
        { "{\"file\": \"other.json\", \"sha256\": \"" DIGEST_OF_NOTHING "\"}", "\"config\" must be" },
        { "{\"file\": \"config.json\", \"sha256\": \"ABC\"}", "\"config\" must be" },
        { "{\"file\": \"config.json\"}", "\"config\" must be" },
        { "{\"file\": \"config.json\", \"sha256\": \"" DIGEST_OF_NOTHING "\", \"x\": 1}", "\"config\" must be" },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(configs); i++) {
        g_autofree char *good = read_text(f.top, SNAP_DIR_STATE_FILE);
        edit_state(f.top, false, "config", configs[i].value);
        assert_refused(f.top, SNAP_ERROR_FORMAT, configs[i].needle);
        g_autofree char *state_path = g_build_filename(f.top, SNAP_DIR_STATE_FILE, NULL);
        g_assert_true(g_file_set_contents(state_path, good, -1, NULL));
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *good = read_text(cases[i].dir, SNAP_DIR_STATE_FILE);
        edit_state(cases[i].dir, true, cases[i].member, cases[i].value);
        assert_refused(cases[i].dir, SNAP_ERROR_FORMAT, cases[i].needle);
        g_autofree char *path = g_build_filename(cases[i].dir, SNAP_DIR_STATE_FILE, NULL);
        g_assert_true(g_file_set_contents(path, good, -1, NULL));
    }
    edit_state(f.top, false, "memory", NULL);
    assert_refused(f.top, SNAP_ERROR_FORMAT, "\"memory\"");
    edit_state(f.top, false, "memory", "[]");
    assert_refused(f.top, SNAP_ERROR_FORMAT, "\"memory\"");
    g_autofree char *path = g_build_filename(f.mid, SNAP_DIR_STATE_FILE, NULL);
    g_assert_true(g_file_set_contents(path, "{\"vsnap_state_version\": 2,", -1, NULL));
    assert_refused(f.mid, SNAP_ERROR_FORMAT, "cannot read state.json");
    g_assert_cmpint(unlink(path), ==, 0);
    assert_refused(f.mid, SNAP_ERROR_FORMAT, "cannot read state.json");
    /* Empty, or only white space (a write cut short): json-glib parses it
     * to no document at all, which once came back as NULL without an error
     * and crashed the shim's vm.restore (found by tests/fuzz state-json). */
    const char *empty[] = { "", " \n\t" };
    for (unsigned i = 0; i < G_N_ELEMENTS(empty); i++) {
        g_assert_true(g_file_set_contents(path, empty[i], -1, NULL));
        assert_refused(f.mid, SNAP_ERROR_FORMAT, "is empty");
    }
    fixture_clear(&f);
}

/* What snapshot-delete of an inner snapshot does in the daemon. */
static void test_fold_keeps_state(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(JsonNode) before = read_json(f.top);
    g_autoptr(GError) error = NULL;
    /* The folded layer replaces top's file and keeps its owner and mode
     * (a shim wrote it, the daemon folds it as root). */
    g_autofree char *top_layer = g_build_filename(f.top, SNAP_DIR_LAYER_FILE, NULL);
    g_assert_cmpint(chmod(top_layer, 0640), ==, 0);
    g_assert_cmpint(chown(top_layer, 65534, 65534), ==, geteuid() == 0 ? 0 : -1);
    g_assert_true(snap_dir_fold_into_child(f.mid, f.top, &error));
    g_assert_no_error(error);
    struct stat st;
    g_assert_cmpint(stat(top_layer, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 0777, ==, 0640);
    if (geteuid() == 0)
        g_assert_cmpint(st.st_uid, ==, 65534);
    g_autoptr(JsonNode) after = read_json(f.top);
    assert_same_but_memory(before, after);
    g_autoptr(snap_dir) top = snap_dir_read(f.top, &error);
    g_assert_no_error(error);
    g_assert_true(snap_id_equal(&top->memory.id, &f.ids[2]));
    g_assert_true(snap_id_equal(&top->memory.parent_id, &f.ids[0]));
    g_assert_cmpstr(top->parent_path, ==, f.base);
    /* The member order of the record stays the writer's. */
    g_autoptr(GList) names = json_object_get_members(memory_of(after));
    const char *order[] = { "layer", "kind", "id", "parent_id", "parent_url", "ram_size" };
    g_assert_cmpuint(g_list_length(names), ==, G_N_ELEMENTS(order));
    for (unsigned i = 0; i < G_N_ELEMENTS(order); i++)
        g_assert_cmpstr(g_list_nth_data(names, i), ==, order[i]);
    /* top no longer needs mid. */
    g_assert_true(snap_dir_remove(f.mid, &error));
    assert_chain_holds_top(f.top, 2, true);
    /* Folding again only fixes the record: nothing changes. */
    g_autofree char *mid_again = make_snapshot(&f, "mid", 1, 0, 2, 2, false);
    g_autofree char *text = read_text(f.top, SNAP_DIR_STATE_FILE);
    g_assert_true(snap_dir_fold_into_child(mid_again, f.top, &error));
    g_autofree char *text_again = read_text(f.top, SNAP_DIR_STATE_FILE);
    g_assert_cmpstr(text, ==, text_again);
    /* Deleting the base makes top full. */
    g_assert_true(snap_dir_fold_into_child(f.base, f.top, &error));
    g_assert_no_error(error);
    g_autoptr(JsonNode) full = read_json(f.top);
    assert_same_but_memory(before, full);
    JsonObject *memory = memory_of(full);
    g_assert_cmpstr(json_object_get_string_member(memory, "kind"), ==, "full");
    g_assert_false(json_object_has_member(memory, "parent_id"));
    g_assert_false(json_object_has_member(memory, "parent_url"));
    g_assert_true(snap_dir_remove(f.base, &error));
    assert_chain_holds_top(f.top, 1, true);
    fixture_clear(&f);
}

static void test_set_parent_refused(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autofree char *before = read_text(f.top, SNAP_DIR_STATE_FILE);
    g_autoptr(GError) error = NULL;
    /* top's layer names mid: base cannot be its parent, nor nothing. */
    g_assert_false(snap_dir_set_parent(f.top, f.base, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN);
    g_clear_error(&error);
    g_assert_false(snap_dir_set_parent(f.top, NULL, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN);
    g_clear_error(&error);
    g_assert_false(snap_dir_fold_into_child(f.base, f.top, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN);
    g_clear_error(&error);
    g_autofree char *after = read_text(f.top, SNAP_DIR_STATE_FILE);
    g_assert_cmpstr(before, ==, after);
    /* Setting the parent it has rewrites the file to the same. */
    g_assert_true(snap_dir_set_parent(f.top, f.mid, &error));
    g_autofree char *same = read_text(f.top, SNAP_DIR_STATE_FILE);
    g_assert_cmpstr(before, ==, same);
    fixture_clear(&f);
}

static void assert_chain_refused(const char *top, const char *needle)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(top, &error);
    g_assert_no_error(error);
    g_autoptr(snap_chain) chain = snap_dir_open_chain(d, &error);
    g_assert_null(chain);
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN);
    if (!strstr(error->message, needle))
        g_error("\"%s\" does not say \"%s\"", error->message, needle);
}

static void test_records_match_layers(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autofree char *good = read_text(f.top, SNAP_DIR_STATE_FILE);
    g_autofree char *path = g_build_filename(f.top, SNAP_DIR_STATE_FILE, NULL);
    snap_id other;
    snap_id_random(&other);
    char other_text[37], base_text[37];
    snap_id_to_string(&other, other_text);
    snap_id_to_string(&f.ids[0], base_text);
    g_autofree char *other_json = g_strdup_printf("\"%s\"", other_text);
    g_autofree char *base_json = g_strdup_printf("\"%s\"", base_text);
    g_autofree char *base_url = snap_dir_url(f.base);
    g_autofree char *base_url_json = g_strdup_printf("\"%s\"", base_url);

    edit_state(f.top, true, "id", other_json);
    assert_chain_refused(f.top, "the id in state.json does not match its layer");
    g_assert_true(g_file_set_contents(path, good, -1, NULL));
    edit_state(f.top, true, "ram_size", "8192");
    assert_chain_refused(f.top, "RAM size");
    g_assert_true(g_file_set_contents(path, good, -1, NULL));
    /* Named by URL but not by id: the wrong parent. */
    edit_state(f.top, true, "parent_url", base_url_json);
    assert_chain_refused(f.top, "wrong parent");
    /* Both name base, but the layer names mid. */
    edit_state(f.top, true, "parent_id", base_json);
    assert_chain_refused(f.top, "wrong parent");
    g_assert_true(g_file_set_contents(path, good, -1, NULL));
    /* A parent_url loop ends at the chain limit, not in a hang. */
    g_autofree char *top_url = snap_dir_url(f.top);
    g_autofree char *mid_url_json = g_strdup_printf("\"%s\"", top_url);
    char top_text[37];
    snap_id_to_string(&f.ids[2], top_text);
    g_autofree char *top_json = g_strdup_printf("\"%s\"", top_text);
    edit_state(f.mid, true, "parent_url", mid_url_json);
    edit_state(f.mid, true, "parent_id", top_json);
    assert_chain_refused(f.top, "longer than");
    fixture_clear(&f);
}

static void flip_byte(const char *path, off_t offset)
{
    int fd = open(path, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    uint8_t b;
    g_assert_cmpint(pread(fd, &b, 1, offset), ==, 1);
    b ^= 0x20;
    g_assert_cmpint(pwrite(fd, &b, 1, offset), ==, 1);
    close(fd);
}

static void test_seal_and_verify(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) top = snap_dir_read(f.top, &error);
    g_assert_true(snap_dir_verify_chain(top, &error)); /* reads every layer, then seals it */
    g_assert_no_error(error);
    g_autofree char *seal = g_strconcat(top->layer_path, SNAP_DIR_SEAL_SUFFIX, NULL);
    g_assert_true(g_file_test(seal, G_FILE_TEST_EXISTS));
    g_assert_true(snap_dir_seal(f.mid, &error));
    /* A data byte changed after the seal: the file changed, so it is read.
     * (File times tick coarsely: let one tick pass, as it does between a
     * snapshot and anything done to its files.) */
    g_usleep(20 * 1000);
    g_autoptr(snap_dir) mid = snap_dir_read(f.mid, &error);
    flip_byte(mid->layer_path, SNAP_LAYER_DATA_OFFSET + 100);
    g_assert_false(snap_dir_verify_chain(top, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM);
    g_assert_nonnull(strstr(error->message, mid->layer_path));
    fixture_clear(&f);
}

/* state.json and config.json as the shim wrote them, and no other: a byte
 * changed, a file deleted or truncated, or one taken from another snapshot
 * is refused by name; so is a layer taken from another snapshot. */
static void test_files_bound(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autofree char *state_path = g_build_filename(f.top, SNAP_DIR_STATE_FILE, NULL);
    g_autofree char *config_path = g_build_filename(f.top, SNAP_DIR_CONFIG_FILE, NULL);
    g_autofree char *good_state = read_text(f.top, SNAP_DIR_STATE_FILE);
    /* One vCPU register changed by hand (the JSON still parses). */
    g_autofree char *edited = g_strdup(good_state);
    char *regs = strstr(edited, "AAECAwQFBgc=");
    g_assert_nonnull(regs);
    regs[0] = 'B';
    g_assert_true(g_file_set_contents(state_path, edited, -1, NULL));
    assert_refused(f.top, SNAP_ERROR_CHECKSUM, "state.json does not match its checksum");
    g_assert_true(g_file_set_contents(state_path, good_state, -1, NULL));
    /* config.json: another domain's, truncated, garbage, a doubled memory
     * size, gone. */
    const char *configs[] = { "{\"cpus\": {\"boot_vcpus\": 1}, \"vsock\": {\"cid\": 9}}",
                              "{\n  \"cpus\" : {\"boot_vcpus\" : 1},", "\x01\x02garbage",
                              "{\n  \"cpus\" : {\"boot_vcpus\" : 1},\n  \"memory\" : {\"size\" : 524288}\n}\n" };
    for (unsigned i = 0; i < G_N_ELEMENTS(configs); i++) {
        g_assert_true(g_file_set_contents(config_path, configs[i], -1, NULL));
        assert_refused(f.top, SNAP_ERROR_CHECKSUM, "config.json is not the one this snapshot was taken with");
    }
    g_assert_cmpint(unlink(config_path), ==, 0);
    assert_refused(f.top, SNAP_ERROR_FORMAT, "config.json");
    g_assert_true(g_file_set_contents(config_path, CONFIG_TEXT, -1, NULL));
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) top = snap_dir_read(f.top, &error);
    g_assert_no_error(error);
    /* Another snapshot's layer in place of mid's: its id is not mid's. */
    g_autofree char *mid_layer = g_build_filename(f.mid, SNAP_DIR_LAYER_FILE, NULL);
    g_autofree char *base_layer = g_build_filename(f.base, SNAP_DIR_LAYER_FILE, NULL);
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(base_layer, &bytes, &len, NULL));
    g_assert_true(g_file_set_contents(mid_layer, bytes, (gssize)len, NULL));
    g_autoptr(snap_chain) chain = snap_dir_open_chain(top, &error);
    g_assert_null(chain);
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN);
    g_assert_nonnull(strstr(error->message, f.mid));
    fixture_clear(&f);
}

static void assert_mode(const char *path, mode_t want)
{
    struct stat st;
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, want);
}

static void test_write_and_commit(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("vsnap-dir-XXXXXX", &error);
    g_autofree char *dest = g_build_filename(root, "snap", NULL);
    g_autofree char *partial = snap_dir_create_partial(dest, &error);
    g_assert_no_error(error);
    g_autofree char *name = g_path_get_basename(partial);
    g_assert_true(g_str_has_prefix(name, ".snap.partial-"));
    g_assert_true(snap_dir_write_file(partial, SNAP_DIR_CONFIG_FILE, "{\"cpus\": {}}", &error));
    g_assert_cmpuint(snap_dir_bytes(dest), >, 0); /* progress while written */
    /* Guest RAM and state are the guest's secrets: nobody else reads them. */
    g_autofree char *partial_config = g_build_filename(partial, SNAP_DIR_CONFIG_FILE, NULL);
    assert_mode(partial, 0700);
    assert_mode(partial_config, 0600);
    g_assert_true(snap_dir_commit(partial, dest, &error));
    g_assert_no_error(error);
    g_assert_false(g_file_test(partial, G_FILE_TEST_EXISTS));
    g_autofree char *config = read_text(dest, SNAP_DIR_CONFIG_FILE);
    g_assert_cmpstr(config, ==, "{\"cpus\": {}}");
    g_autofree char *nowhere = g_build_filename(root, "missing", "snap", NULL);
    g_assert_null(snap_dir_create_partial(nowhere, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    g_clear_error(&error);
    g_assert_true(snap_dir_remove(root, &error));
    g_assert_true(snap_dir_remove(root, &error)); /* already gone */
    g_assert_no_error(error);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_assert_true(g_file_set_contents(path, text, -1, &error));
    g_assert_no_error(error);
}

static unsigned count_entries(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    unsigned n = 0;
    while (d && g_dir_read_name(d))
        n++;
    return n;
}

static void assert_destination_refused(const char *dest, const char *needle)
{
    g_autoptr(GError) error = NULL;
    g_assert_false(snap_dir_check_destination(dest, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, needle));
}

/* libvirt's ch driver creates the directory, writes libvirt-save.xml and only
 * then asks for the snapshot: the file stays, the snapshot appears whole. */
static void test_prepared_destination(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("vsnap-dir-XXXXXX", &error);
    g_autofree char *dest = g_build_filename(root, "save", NULL);
    g_assert_true(snap_dir_check_destination(dest, &error)); /* absent */
    g_assert_cmpint(g_mkdir(dest, 0770), ==, 0);
    g_assert_true(snap_dir_check_destination(dest, &error)); /* empty */
    write_text(dest, "libvirt-save.xml", "LibvirtXML header and domain");
    g_autofree char *xml = g_build_filename(dest, "libvirt-save.xml", NULL);
    g_assert_cmpint(chmod(xml, 0600), ==, 0);
    g_assert_true(snap_dir_check_destination(dest, &error));
    g_assert_no_error(error);

    g_autofree char *partial = snap_dir_create_partial(dest, &error);
    g_assert_true(snap_dir_write_file(partial, SNAP_DIR_STATE_FILE, "{}", &error));
    g_assert_true(snap_dir_commit(partial, dest, &error));
    g_assert_no_error(error);
    g_autofree char *state = read_text(dest, SNAP_DIR_STATE_FILE);
    g_autofree char *kept = read_text(dest, "libvirt-save.xml");
    g_assert_cmpstr(state, ==, "{}");
    g_assert_cmpstr(kept, ==, "LibvirtXML header and domain");
    struct stat st;
    g_assert_cmpint(stat(xml, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
    g_assert_cmpuint(count_entries(dest), ==, 2);
    g_assert_cmpuint(count_entries(root), ==, 1); /* neither partial nor old directory left */

    /* Now it holds a snapshot: never again. */
    assert_destination_refused(dest, SNAP_DIR_STATE_FILE);
    g_autofree char *again = snap_dir_create_partial(dest, &error);
    g_assert_false(snap_dir_commit(again, dest, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    g_clear_error(&error);
    g_autofree char *unchanged = read_text(dest, SNAP_DIR_STATE_FILE);
    g_assert_cmpstr(unchanged, ==, "{}");
    g_assert_true(snap_dir_remove(again, &error));
    g_assert_true(snap_dir_remove(root, &error));
}

static void test_destination_refusals(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("vsnap-dir-XXXXXX", &error);
    g_autofree char *file = g_build_filename(root, "file", NULL);
    write_text(root, "file", "x");
    assert_destination_refused(file, "not a directory");
    const char *own[] = { SNAP_DIR_CONFIG_FILE, SNAP_DIR_LAYER_FILE, SNAP_DIR_LAYER_FILE ".seal",
                          SNAP_DIR_LAYER_FILE ".tmp-a1b2c3", SNAP_DIR_STATE_FILE ".Q7XZ2A" };
    for (unsigned i = 0; i < G_N_ELEMENTS(own); i++) {
        g_autofree char *dir = g_strdup_printf("%s/own%u", root, i);
        g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
        write_text(dir, "libvirt-save.xml", "x");
        write_text(dir, own[i], "x");
        assert_destination_refused(dir, own[i]);
    }
    g_autofree char *nested = g_build_filename(root, "nested", "sub", NULL);
    g_assert_cmpint(g_mkdir_with_parents(nested, 0755), ==, 0);
    g_autofree char *parent = g_path_get_dirname(nested);
    assert_destination_refused(parent, "not a regular file: sub");
    g_assert_true(snap_dir_is_snapshot_file("memory-ranges"));
    g_assert_false(snap_dir_is_snapshot_file("memory-ranges-old"));
    g_assert_false(snap_dir_is_snapshot_file("libvirt-save.xml"));
    g_assert_true(snap_dir_remove(root, &error));
}

static void test_urls(void)
{
    const char *paths[] = { "/var/lib/vsnap/snapshots/d/1", "/tmp/a b/100%/é", "/" };
    for (unsigned i = 0; i < G_N_ELEMENTS(paths); i++) {
        g_autofree char *url = snap_dir_url(paths[i]);
        g_assert_true(g_str_has_prefix(url, "file:///"));
        g_autoptr(GError) error = NULL;
        g_autofree char *back = snap_dir_path_from_url(url, &error);
        g_assert_no_error(error);
        g_assert_cmpstr(back, ==, paths[i]);
    }
    g_autoptr(GError) error = NULL;
    g_autofree char *trimmed = snap_dir_path_from_url("file:///a/b//", &error);
    g_assert_cmpstr(trimmed, ==, "/a/b");
    g_autofree char *plain = snap_dir_path_from_url("/a/b", &error);
    g_assert_cmpstr(plain, ==, "/a/b");
    const char *bad[] = { "http://host/a", "file://a/b", "a/b", "", "file://" };
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_null(snap_dir_path_from_url(bad[i], &error));
        g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
        g_clear_error(&error);
    }
    g_assert_null(snap_dir_path_from_url(NULL, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/directory/read", test_read);
    g_test_add_func("/snapshot/directory/version-refused", test_version_refused);
    g_test_add_func("/snapshot/directory/bad-records-refused", test_bad_records_refused);
    g_test_add_func("/snapshot/directory/fold-keeps-state", test_fold_keeps_state);
    g_test_add_func("/snapshot/directory/set-parent-refused", test_set_parent_refused);
    g_test_add_func("/snapshot/directory/records-match-layers", test_records_match_layers);
    g_test_add_func("/snapshot/directory/files-bound", test_files_bound);
    g_test_add_func("/snapshot/directory/seal-and-verify", test_seal_and_verify);
    g_test_add_func("/snapshot/directory/write-and-commit", test_write_and_commit);
    g_test_add_func("/snapshot/directory/prepared-destination", test_prepared_destination);
    g_test_add_func("/snapshot/directory/destination-refusals", test_destination_refusals);
    g_test_add_func("/snapshot/directory/urls", test_urls);
    return g_test_run();
}
