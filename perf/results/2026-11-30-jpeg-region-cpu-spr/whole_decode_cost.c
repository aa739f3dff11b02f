#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jpeglib.h>
static unsigned char* slurp(const char* p, unsigned long* n){FILE*f=fopen(p,"rb");fseek(f,0,2);*n=ftell(f);fseek(f,0,0);unsigned char*b=malloc(*n);fread(b,1,*n,f);fclose(f);return b;}
static unsigned char* transcode(unsigned char* in, unsigned long n, int ri, unsigned long* outn){
  struct jpeg_decompress_struct d; struct jpeg_compress_struct c; struct jpeg_error_mgr e1,e2;
  d.err=jpeg_std_error(&e1); jpeg_create_decompress(&d); jpeg_mem_src(&d,in,n); jpeg_read_header(&d,TRUE);
  jvirt_barray_ptr* co=jpeg_read_coefficients(&d);
  c.err=jpeg_std_error(&e2); jpeg_create_compress(&c); unsigned char* out=NULL; *outn=0; jpeg_mem_dest(&c,&out,outn);
  jpeg_copy_critical_parameters(&d,&c); c.restart_interval=ri; c.optimize_coding=FALSE;
  jpeg_write_coefficients(&c,co); jpeg_finish_compress(&c); jpeg_destroy_compress(&c); jpeg_finish_decompress(&d); jpeg_destroy_decompress(&d); return out;}
static double decode(unsigned char* in, unsigned long n, int reps){
  unsigned char* buf=malloc(8000*3*8000); struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a);
  for(int r=0;r<reps;r++){struct jpeg_decompress_struct d; struct jpeg_error_mgr e; d.err=jpeg_std_error(&e); jpeg_create_decompress(&d); jpeg_mem_src(&d,in,n); jpeg_read_header(&d,TRUE); d.out_color_space=JCS_RGB; jpeg_start_decompress(&d);
    while(d.output_scanline<d.output_height){JSAMPROW row=buf+d.output_scanline*d.output_width*3; jpeg_read_scanlines(&d,&row,1);} jpeg_finish_decompress(&d); jpeg_destroy_decompress(&d);}
  clock_gettime(CLOCK_MONOTONIC,&b); free(buf); return ((b.tv_sec-a.tv_sec)+1e-9*(b.tv_nsec-a.tv_nsec))/reps*1e6;}
int main(int argc,char**argv){ for(int i=1;i<argc;i++){unsigned long n; unsigned char* b=slurp(argv[i],&n);
  unsigned long n0,n1,n4; unsigned char* t0=transcode(b,n,0,&n0); unsigned char* t1=transcode(b,n,1,&n1); unsigned char* t4=transcode(b,n,4,&n4);
  double u0=decode(t0,n0,200), u1=decode(t1,n1,200), u4=decode(t4,n4,200), u0b=decode(t0,n0,200);
  printf("%s bytes %lu/%lu/%lu  us: ri0 %.0f %.0f  ri1 %.0f  ri4 %.0f\n",argv[i],n0,n1,n4,u0,u0b,u1,u4);} }
