#include <mosquitto.h>
// MQTT 5 property and reason codes (MQTT_PROP_MAXIMUM_PACKET_SIZE, MQTT_RC_SESSION_TAKEN_OVER).
#include <mqtt_protocol.h>
// eventfd(2): the link thread's wakeup, polled beside the broker's socket (Swift's Glibc module does not export it).
#include <sys/eventfd.h>
