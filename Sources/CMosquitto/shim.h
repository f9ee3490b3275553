#include <mosquitto.h>
// eventfd(2): the link thread's wakeup, polled beside the broker's socket (Swift's Glibc module does not export it).
#include <sys/eventfd.h>
