/*
 * ggml's eval callback, answering "is this node wanted?" in C.
 *
 * llama.cpp's scheduler asks the context's `cb_eval` about every node of every
 * graph (ask=true), and calls it again (ask=false) only for the nodes answered
 * yes, once they are computed. The 1.5B's graph has ~1100 nodes; answered in
 * Python, each question takes the GIL, which another thread running Python (the
 * event loop, the ASR and TTS workers) holds for up to the interpreter's switch
 * interval, so a draft beside busy Python took 2.5x as long. Here the questions
 * are answered from a name prefix and a set of numbers (the layer in
 * `kq_soft_max-L`), and only the wanted nodes, once computed, reach Python.
 *
 * `struct node_filter` is mirrored by `llama_native._NodeFilterConfig` (ctypes);
 * `config_size()` lets that side check the two agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NODE_FILTER_NUMBERS 1024
#define NODE_FILTER_PREFIX 64

struct node_filter {
    /* ggml_get_name(tensor) */
    const char *(*get_name)(const void *tensor);
    /* Called (with ask=false) for each wanted node once computed: false stops the graph. */
    bool (*computed)(void *tensor, bool ask, void *user_data);
    void *computed_user_data;
    /* Zero: no node is wanted, and the graph computes in one go. */
    int32_t armed;
    /* Wanted: the nodes named `prefix` + a number n with wanted[n] set (+ anything after '-'). */
    char prefix[NODE_FILTER_PREFIX];
    uint8_t wanted[NODE_FILTER_NUMBERS];
};

static bool wanted(const struct node_filter *filter, const char *name) {
    size_t length = strlen(filter->prefix);
    if (strncmp(name, filter->prefix, length) != 0) {
        return false;
    }
    const char *digits = name + length;
    char *end = NULL;
    long number = strtol(digits, &end, 10);
    if (end == digits || (*end != '\0' && *end != '-')) {
        return false;
    }
    return number >= 0 && number < NODE_FILTER_NUMBERS && filter->wanted[number];
}

static bool node_filter_eval(void *tensor, bool ask, void *user_data) {
    const struct node_filter *filter = user_data;
    if (!ask) {
        return filter->computed(tensor, false, filter->computed_user_data);
    }
    return filter->armed && wanted(filter, filter->get_name(tensor));
}

static PyObject *callback_address(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyLong_FromVoidPtr((void *)&node_filter_eval);
}

static PyObject *config_size(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyLong_FromSize_t(sizeof(struct node_filter));
}

static PyMethodDef methods[] = {
    {"callback_address", callback_address, METH_NOARGS,
     "The address of the C eval callback; its user data is a node_filter config."},
    {"config_size", config_size, METH_NOARGS, "sizeof(struct node_filter)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_node_filter",
    .m_doc = "ggml's eval callback, answered in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__node_filter(void) { return PyModule_Create(&module); }
