#ifndef CLOUDSYNC_CXML_SHIM_H
#define CLOUDSYNC_CXML_SHIM_H
// libxml2's push parser and SAX2 interface (used only through CloudSyncXML).
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU, so encoding.h would include the system's <unicode/ucnv.h>, whose
// UErrorCode clashes with the copy inside Foundation's _FoundationICU module in any Swift file that imports
// both ("'UErrorCode' has different definitions in different modules"). ICU only adds two pointer fields at
// the end of xmlCharEncodingHandler, a struct CloudSyncXML never allocates or reads, so hiding it is safe.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>
#endif
