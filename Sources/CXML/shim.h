#ifndef CLOUDSYNC_CXML_SHIM_H
#define CLOUDSYNC_CXML_SHIM_H
// libxml2's push parser and SAX2 interface (used only through CloudSyncXML).
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>
#endif
