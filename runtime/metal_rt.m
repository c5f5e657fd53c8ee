/*
 * metal_rt.m — the Metal operations of metal_dev.h over Apple's Metal
 * framework (built on macOS only; backend_metal.c is the rest of the Metal
 * backend, in portable C).
 *
 *   device     MTLCreateSystemDefaultDevice and one command queue
 *   buffers    MTLResourceStorageModeShared (unified memory: the CPU reads
 *              and writes what the GPU sees); the weights wrapped with
 *              newBufferWithBytesNoCopy on the mmapped file's pages;
 *              device pointers stored in buffers are gpuAddress values
 *              (macOS 13)
 *   library    the model's .metallib (newLibraryWithData) when it was built
 *              on a Mac, else newLibraryWithSource with precise math (no
 *              fast-math reassociation), MSL 3.0; the framework caches
 *              compiled shaders on disk, so a model loads fast from its
 *              second run
 *   commands   one command buffer and one serial compute encoder per
 *              command list: dispatches run in order, each seeing the
 *              writes of the ones before
 *
 * Status: written against Apple's documentation; it has not run on Apple
 * hardware in this project's tests (no Mac there).  tests/metal/run.sh is
 * the check to run on a Mac.
 *
 * Compiled with ARC: handles given to C are retained (__bridge_retained)
 * and released in the *_free functions (__bridge_transfer).
 */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <stdio.h>
#include <string.h>

#include "metal_dev.h"

typedef struct MtDev {
  void *device; /* id<MTLDevice>, retained */
  void *queue;  /* id<MTLCommandQueue>, retained */
} MtDev;

typedef struct MtCmd {
  void *buffer;  /* id<MTLCommandBuffer>, retained */
  void *encoder; /* id<MTLComputeCommandEncoder>, retained */
  int bad;
  char why[256];
} MtCmd;

static void say(char *err, size_t size, NSString *what, NSError *e) {
  if (!err || !size) return;
  snprintf(err, size, "%s%s%s", what.UTF8String, e ? ": " : "", e ? e.localizedDescription.UTF8String : "");
}

static void *mt_open(char *name, size_t name_size, char *err, size_t err_size) {
  @autoreleasepool {
    id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
    if (!dev) {
      say(err, err_size, @"MTLCreateSystemDefaultDevice found no GPU", nil);
      return NULL;
    }
    if (@available(macOS 13.0, *)) {
    } else {
      say(err, err_size, @"Metal 3 (macOS 13 or later) is needed: kernels read GPU addresses", nil);
      return NULL;
    }
    id<MTLCommandQueue> q = [dev newCommandQueue];
    if (!q) {
      say(err, err_size, @"newCommandQueue failed", nil);
      return NULL;
    }
    MtDev *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->device = (__bridge_retained void *)dev;
    d->queue = (__bridge_retained void *)q;
    snprintf(name, name_size, "%s", dev.name.UTF8String);
    return d;
  }
}

static void mt_close(void *dev) {
  MtDev *d = dev;
  if (!d) return;
  id<MTLCommandQueue> q = (__bridge_transfer id<MTLCommandQueue>)d->queue;
  id<MTLDevice> device = (__bridge_transfer id<MTLDevice>)d->device;
  (void)q, (void)device;
  free(d);
}

static uint64_t gpu_address(id<MTLBuffer> b) {
  if (@available(macOS 13.0, *)) return b.gpuAddress;
  return 0;
}

static void *mt_buffer_new(void *dev, size_t bytes, void **contents, uint64_t *gpu, char *err, size_t err_size) {
  MtDev *d = dev;
  id<MTLDevice> device = (__bridge id<MTLDevice>)d->device;
  id<MTLBuffer> b = [device newBufferWithLength:bytes options:MTLResourceStorageModeShared];
  if (!b) {
    say(err, err_size, [NSString stringWithFormat:@"newBufferWithLength:%zu failed", bytes], nil);
    return NULL;
  }
  memset(b.contents, 0, bytes);
  *contents = b.contents;
  *gpu = gpu_address(b);
  return (__bridge_retained void *)b;
}

static void *mt_buffer_wrap(void *dev, void *p, size_t bytes, uint64_t *gpu, char *err, size_t err_size) {
  MtDev *d = dev;
  id<MTLDevice> device = (__bridge id<MTLDevice>)d->device;
  id<MTLBuffer> b = [device newBufferWithBytesNoCopy:p length:bytes options:MTLResourceStorageModeShared
                                        deallocator:nil];
  if (!b) {
    say(err, err_size, [NSString stringWithFormat:@"newBufferWithBytesNoCopy (%zu bytes) failed", bytes], nil);
    return NULL;
  }
  *gpu = gpu_address(b);
  return (__bridge_retained void *)b;
}

static void mt_buffer_free(void *buf) {
  if (buf) {
    id<MTLBuffer> b = (__bridge_transfer id<MTLBuffer>)buf;
    (void)b;
  }
}

static void *mt_library_new(void *dev, const char *source, char *err, size_t err_size) {
  @autoreleasepool {
    MtDev *d = dev;
    id<MTLDevice> device = (__bridge id<MTLDevice>)d->device;
    MTLCompileOptions *o = [MTLCompileOptions new];
#if defined(__MAC_15_0) && __MAC_OS_X_VERSION_MAX_ALLOWED >= __MAC_15_0
    if (@available(macOS 15.0, *)) o.mathMode = MTLMathModeSafe; /* the SDK has it */
    else o.fastMathEnabled = NO;
#else
    o.fastMathEnabled = NO;
#endif
    o.languageVersion = MTLLanguageVersion3_0;
    NSError *e = nil;
    NSString *src = [NSString stringWithUTF8String:source];
    id<MTLLibrary> lib = src ? [device newLibraryWithSource:src options:o error:&e] : nil;
    if (!lib) {
      say(err, err_size, @"newLibraryWithSource failed", e);
      return NULL;
    }
    return (__bridge_retained void *)lib;
  }
}

static void *mt_library_data(void *dev, const void *data, size_t bytes, char *err, size_t err_size) {
  @autoreleasepool {
    MtDev *d = dev;
    id<MTLDevice> device = (__bridge id<MTLDevice>)d->device;
    dispatch_data_t dd = dispatch_data_create(data, bytes, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    NSError *e = nil;
    id<MTLLibrary> lib = [device newLibraryWithData:dd error:&e];
    if (!lib) {
      say(err, err_size, @"newLibraryWithData (the model's .metallib) failed", e);
      return NULL;
    }
    return (__bridge_retained void *)lib;
  }
}

static void mt_library_free(void *lib) {
  if (lib) {
    id<MTLLibrary> l = (__bridge_transfer id<MTLLibrary>)lib;
    (void)l;
  }
}

static void *mt_pipeline_new(void *dev, void *lib, const char *name, char *err, size_t err_size) {
  @autoreleasepool {
    MtDev *d = dev;
    id<MTLDevice> device = (__bridge id<MTLDevice>)d->device;
    id<MTLLibrary> l = (__bridge id<MTLLibrary>)lib;
    id<MTLFunction> fn = [l newFunctionWithName:[NSString stringWithUTF8String:name]];
    if (!fn) {
      say(err, err_size, [NSString stringWithFormat:@"no kernel function %s", name], nil);
      return NULL;
    }
    NSError *e = nil;
    id<MTLComputePipelineState> p = [device newComputePipelineStateWithFunction:fn error:&e];
    if (!p) {
      say(err, err_size, [NSString stringWithFormat:@"pipeline of %s", name], e);
      return NULL;
    }
    return (__bridge_retained void *)p;
  }
}

static void mt_pipeline_free(void *pipe) {
  if (pipe) {
    id<MTLComputePipelineState> p = (__bridge_transfer id<MTLComputePipelineState>)pipe;
    (void)p;
  }
}

static void *mt_begin(void *dev, char *err, size_t err_size) {
  MtDev *d = dev;
  id<MTLCommandQueue> q = (__bridge id<MTLCommandQueue>)d->queue;
  id<MTLCommandBuffer> cb = [q commandBuffer];
  id<MTLComputeCommandEncoder> enc = cb ? [cb computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial] : nil;
  MtCmd *c = enc ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    say(err, err_size, @"a command buffer and compute encoder could not be made", nil);
    return NULL;
  }
  c->buffer = (__bridge_retained void *)cb;
  c->encoder = (__bridge_retained void *)enc;
  return c;
}

static void mt_dispatch(void *cmd, void *pipe, unsigned gx, unsigned gy, unsigned threads, int n_bufs,
                        void *const *bufs, const size_t *offs, int value) {
  MtCmd *c = cmd;
  if (c->bad) return;
  id<MTLComputeCommandEncoder> enc = (__bridge id<MTLComputeCommandEncoder>)c->encoder;
  id<MTLComputePipelineState> p = (__bridge id<MTLComputePipelineState>)pipe;
  if (threads > p.maxTotalThreadsPerThreadgroup) {
    c->bad = 1;
    snprintf(c->why, sizeof c->why, "a kernel launched with %u threads a group; this GPU runs it with at most %lu",
             threads, (unsigned long)p.maxTotalThreadsPerThreadgroup);
    return;
  }
  [enc setComputePipelineState:p];
  for (int i = 0; i < n_bufs; i++)
    [enc setBuffer:(__bridge id<MTLBuffer>)bufs[i] offset:offs[i] atIndex:(NSUInteger)i];
  [enc setBytes:&value length:sizeof value atIndex:(NSUInteger)n_bufs];
  [enc dispatchThreadgroups:MTLSizeMake(gx, gy, 1) threadsPerThreadgroup:MTLSizeMake(threads, 1, 1)];
}

static void mt_use(void *cmd, void *buf) {
  MtCmd *c = cmd;
  id<MTLComputeCommandEncoder> enc = (__bridge id<MTLComputeCommandEncoder>)c->encoder;
  [enc useResource:(__bridge id<MTLBuffer>)buf usage:MTLResourceUsageRead | MTLResourceUsageWrite];
}

static int mt_end(void *cmd, char *err, size_t err_size) {
  MtCmd *c = cmd;
  id<MTLCommandBuffer> cb = (__bridge_transfer id<MTLCommandBuffer>)c->buffer;
  id<MTLComputeCommandEncoder> enc = (__bridge_transfer id<MTLComputeCommandEncoder>)c->encoder;
  [enc endEncoding];
  int rc = 0;
  if (c->bad) {
    snprintf(err, err_size, "%s", c->why);
    rc = 1;
  } else {
    [cb commit];
    [cb waitUntilCompleted];
    if (cb.status != MTLCommandBufferStatusCompleted) {
      say(err, err_size, @"the command buffer failed", cb.error);
      rc = 1;
    }
  }
  free(c);
  return rc;
}

static const sc_metal_api api = {
    .version = SC_METAL_API_VERSION,
    .open = mt_open,
    .close = mt_close,
    .buffer_new = mt_buffer_new,
    .buffer_wrap = mt_buffer_wrap,
    .buffer_free = mt_buffer_free,
    .library_new = mt_library_new,
    .library_data = mt_library_data,
    .library_free = mt_library_free,
    .pipeline_new = mt_pipeline_new,
    .pipeline_free = mt_pipeline_free,
    .begin = mt_begin,
    .dispatch = mt_dispatch,
    .use = mt_use,
    .end = mt_end,
};

const sc_metal_api *sc_metal_api_get(void) { return &api; }
